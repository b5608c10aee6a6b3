//! Replacing a generated block of a Markdown file, between the comments
//! `<!-- NAME:begin -->` and `<!-- NAME:end -->`.

use anyhow::bail;

/// `text` with the block `name` replaced by `content`.
pub fn replace_block(text: &str, name: &str, content: &str) -> anyhow::Result<String> {
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) else {
        bail!("no `{begin}` ... `{end}` block");
    };
    if e < b {
        bail!("`{end}` comes before `{begin}`");
    }
    let head = &text[..b + begin.len()];
    let tail = &text[e..];
    Ok(format!("{head}\n{content}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::replace_block;

    #[test]
    fn only_the_block_is_replaced() {
        let text = "a\n<!-- x:begin -->\nold\n<!-- x:end -->\nb\n";
        let new = replace_block(text, "x", "new\n").expect("block");
        assert_eq!(new, "a\n<!-- x:begin -->\nnew\n<!-- x:end -->\nb\n");
        assert_eq!(replace_block(&new, "x", "new\n").expect("block"), new);
    }

    #[test]
    fn a_missing_block_is_an_error() {
        assert!(replace_block("a\n", "x", "new\n").is_err());
        assert!(replace_block("<!-- x:end --><!-- x:begin -->", "x", "").is_err());
    }
}
