//! The two kinds of chart the sections need, drawn with plotters into SVG:
//! horizontal bars (a median, its p90 as a whisker, a target as a tick, a
//! note such as a survivor count) and log-log growth curves.

use std::path::Path;

use anyhow::anyhow;
use plotters::{
    coord::{Shift, ranged1d::SegmentValue},
    prelude::*,
};

/// Width of one panel, in pixels.
pub const PANEL_WIDTH: u32 = 860;
const FONT: &str = "sans-serif";

/// One bar.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// The p90, drawn as a whisker from the end of the bar.
    pub whisker: Option<f64>,
    /// A target for this bar, drawn as a tick across it.
    pub target: Option<f64>,
    /// Text after the value ("1.46x", "333/1001 left").
    pub note: String,
    /// Drawn in red: the bar stands for something left behind or missed.
    pub alarm: bool,
}

impl Bar {
    pub fn new(label: impl Into<String>, value: f64) -> Self {
        Self {
            label: label.into(),
            value,
            whisker: None,
            target: None,
            note: String::new(),
            alarm: false,
        }
    }

    pub fn whisker(mut self, p90: Option<f64>) -> Self {
        self.whisker = p90;
        self
    }

    pub fn target(mut self, target: Option<f64>) -> Self {
        self.target = target;
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    pub fn alarm(mut self, alarm: bool) -> Self {
        self.alarm = alarm;
        self
    }
}

/// A panel of bars sharing one axis.
#[derive(Debug, Clone)]
pub struct BarPanel {
    pub title: String,
    /// The axis description, with its unit.
    pub axis: String,
    pub bars: Vec<Bar>,
}

/// A colour per contender, the same in every chart: corral's backends in
/// blues and greens, the alternatives in orange and red, baselines and
/// diagnostics in greys.
pub fn colour(label: &str) -> RGBColor {
    let l = label.to_ascii_lowercase();
    let palette = [
        // The MCP clients (before "tokio", which `TokioChildProcess` contains).
        ("python sdk", RGBColor(255, 127, 14)),
        ("typescript sdk", RGBColor(214, 39, 40)),
        ("tokiochildprocess", RGBColor(148, 103, 189)),
        ("corralprocess", RGBColor(31, 119, 180)),
        ("corral manager", RGBColor(44, 160, 44)),
        ("(diag)", RGBColor(170, 170, 170)),
        ("process-wrap", RGBColor(255, 127, 14)),
        ("timeout", RGBColor(214, 39, 40)),
        ("cgroup", RGBColor(31, 119, 180)),
        ("subreaper", RGBColor(23, 190, 207)),
        ("group", RGBColor(44, 160, 44)),
        ("direct", RGBColor(120, 120, 120)),
        ("tokio", RGBColor(120, 120, 120)),
        ("guard off", RGBColor(120, 120, 120)),
    ];
    palette
        .iter()
        .find(|(key, _)| l.contains(key))
        .map_or(RGBColor(31, 119, 180), |(_, c)| *c)
}

/// An axis label: `0.5`, `40`, `500k`, `2M`.
fn tick(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing: {e:?}")
}

/// Draws `panels` stacked in one SVG file of [`PANEL_WIDTH`].
pub fn bar_chart(path: &Path, title: &str, panels: &[BarPanel]) -> anyhow::Result<()> {
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| 70 + 34 * p.bars.len() as u32)
        .collect();
    let height = 40 + heights.iter().sum::<u32>();
    let root = SVGBackend::new(path, (PANEL_WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 20).into_font()).map_err(err)?;
    let mut rest = root;
    for (panel, h) in panels.iter().zip(heights) {
        let (area, below) = rest.split_vertically(h);
        draw_bars(&area, panel)?;
        rest = below;
    }
    root_present(&rest)
}

fn root_present<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> anyhow::Result<()> {
    area.present().map_err(err)
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &BarPanel,
) -> anyhow::Result<()> {
    let k = panel.bars.len();
    let top = panel
        .bars
        .iter()
        .flat_map(|b| [Some(b.value), b.whisker, b.target])
        .flatten()
        .fold(0.0_f64, f64::max);
    // Room on the right for the value and note after the longest bar.
    let x_max = if top > 0.0 { top * 1.55 } else { 1.0 };
    let labels: Vec<String> = panel.bars.iter().rev().map(|b| b.label.clone()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15).into_font())
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(250)
        .build_cartesian_2d(0.0..x_max, (0..k.saturating_sub(1)).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(&panel.axis)
        .x_labels(8)
        .x_label_formatter(&|v| tick(*v))
        .y_labels(k)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (i, bar) in panel.bars.iter().enumerate() {
        let slot = k - 1 - i;
        let fill = colour(&bar.label);
        let mut rect = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(slot)),
                (bar.value, SegmentValue::Exact(slot + 1)),
            ],
            fill.filled(),
        );
        rect.set_margin(5, 5, 0, 0);
        chart.draw_series(std::iter::once(rect)).map_err(err)?;
        let centre = SegmentValue::CenterOf(slot);
        if let Some(p90) = bar.whisker.filter(|p| *p > bar.value) {
            let whisker = PathElement::new(
                vec![(bar.value, centre.clone()), (p90, centre.clone())],
                BLACK.stroke_width(1),
            );
            chart.draw_series(std::iter::once(whisker)).map_err(err)?;
        }
        if let Some(target) = bar.target {
            let tick = PathElement::new(
                vec![
                    (target, SegmentValue::Exact(slot)),
                    (target, SegmentValue::Exact(slot + 1)),
                ],
                BLACK.stroke_width(3),
            );
            chart.draw_series(std::iter::once(tick)).map_err(err)?;
        }
        let end = [Some(bar.value), bar.whisker, bar.target]
            .into_iter()
            .flatten()
            .fold(0.0_f64, f64::max);
        let text_colour = if bar.alarm { RED } else { BLACK };
        let text = EmptyElement::at((end, centre))
            + Text::new(
                bar.note.clone(),
                (6, -6),
                (FONT, 12).into_font().color(&text_colour),
            );
        chart.draw_series(std::iter::once(text)).map_err(err)?;
    }
    Ok(())
}

/// One curve: points (N, value, processes left alive).
#[derive(Debug, Clone)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64, usize)>,
}

/// A log-log panel of curves.
#[derive(Debug, Clone)]
pub struct CurvePanel {
    pub title: String,
    pub axis: String,
    pub curves: Vec<Curve>,
}

/// Draws `panels` side by side in one SVG file: x = tree size, y = time,
/// both logarithmic; a point where processes were left alive is ringed and
/// labelled with their count.
pub fn curve_chart(path: &Path, title: &str, panels: &[CurvePanel]) -> anyhow::Result<()> {
    let width = 560 * panels.len() as u32;
    let root = SVGBackend::new(path, (width.max(PANEL_WIDTH), 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, (FONT, 20).into_font()).map_err(err)?;
    for (area, panel) in root.split_evenly((1, panels.len())).iter().zip(panels) {
        draw_curves(area, panel)?;
    }
    root_present(&root)
}

fn draw_curves<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &CurvePanel,
) -> anyhow::Result<()> {
    let points = || panel.curves.iter().flat_map(|c| c.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0_f64, f64::max) * 2.2;
    let y_max = points().map(|p| p.1).fold(1e-3_f64, f64::max) * 2.0;
    let y_min = points()
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min)
        .max(1e-3)
        / 1.6;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 15).into_font())
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d((0.7..x_max).log_scale(), (y_min..y_max).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("processes in the tree")
        .y_desc(&panel.axis)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (index, curve) in panel.curves.iter().enumerate() {
        let style = colour(&curve.label).stroke_width(2);
        let line: Vec<(f64, f64)> = curve.points.iter().map(|p| (p.0, p.1)).collect();
        chart
            .draw_series(std::iter::once(PathElement::new(line.clone(), style)))
            .map_err(err)?
            .label(curve.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 3, style.filled())))
            .map_err(err)?;
        for &(x, y, left) in curve.points.iter().filter(|p| p.2 > 0) {
            let ring = Circle::new((x, y), 7, RED.stroke_width(2));
            let text = EmptyElement::at((x, y))
                + Text::new(
                    format!("{left} left"),
                    (10, 12 * (index as i32 % 3) - 4),
                    (FONT, 11).into_font().color(&RED),
                );
            chart.draw_series(std::iter::once(ring)).map_err(err)?;
            chart.draw_series(std::iter::once(text)).map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 11))
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.5), "0.5");
        assert_eq!(tick(40.0), "40");
        assert_eq!(tick(500_000.0), "500k");
        assert_eq!(tick(2_500_000.0), "2.5M");
    }
}
