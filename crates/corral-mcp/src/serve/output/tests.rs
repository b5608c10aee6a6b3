use super::*;

fn head_tail(cap: usize, pushes: &[&[u8]]) -> HeadTail {
    let mut capture = HeadTail::new(cap);
    for data in pushes {
        capture.push(data);
    }
    capture
}

#[test]
fn head_tail_under_the_cap_keeps_everything_without_a_marker() {
    let capture = head_tail(10, &[b"abc", b"def"]);
    assert_eq!(capture.total(), 6);
    assert_eq!(capture.dropped(), 0);
    assert_eq!(capture.text(), "abcdef");
}

#[test]
fn head_tail_exactly_at_the_cap_drops_nothing() {
    let capture = head_tail(6, &[b"abcdef"]);
    assert_eq!(capture.dropped(), 0);
    assert_eq!(capture.text(), "abcdef");
}

#[test]
fn head_tail_keeps_first_and_last_half_and_marks_the_gap() {
    let capture = head_tail(6, &[b"abcdefghij"]);
    assert_eq!(capture.total(), 10);
    assert_eq!(capture.dropped(), 4);
    assert_eq!(capture.text(), "abc\n[corral: 4 bytes dropped here]\nhij");
}

#[test]
fn head_tail_same_result_whatever_the_chunking() {
    let data: Vec<u8> = (0..=255u8).cycle().take(5_000).collect();
    let whole = head_tail(101, &[&data]);
    for size in [1, 2, 7, 50, 51, 100, 333, 4_999] {
        let mut capture = HeadTail::new(101);
        for piece in data.chunks(size) {
            capture.push(piece);
        }
        assert_eq!(capture.text(), whole.text(), "chunks of {size}");
        assert_eq!(capture.dropped(), 5_000 - 101);
    }
    // Odd cap: 50 at the head, 51 at the tail.
    let kept: Vec<u8> = data[..50]
        .iter()
        .chain(&data[5_000 - 51..])
        .copied()
        .collect();
    assert_eq!(whole.head.len() + whole.tail.len(), kept.len());
}

#[test]
fn head_tail_cap_zero_keeps_nothing() {
    let capture = head_tail(0, &[b"abc", b"", b"de"]);
    assert_eq!(capture.total(), 5);
    assert_eq!(capture.dropped(), 5);
    assert_eq!(capture.text(), "\n[corral: 5 bytes dropped here]\n");
}

#[test]
fn head_tail_cap_one_keeps_only_the_last_byte() {
    let capture = head_tail(1, &[b"abc"]);
    assert_eq!(capture.text(), "\n[corral: 2 bytes dropped here]\nc");
}

#[test]
fn head_tail_memory_stays_bounded() {
    let mut capture = HeadTail::new(64);
    for _ in 0..10_000 {
        capture.push(&[b'x'; 37]);
    }
    assert!(capture.head.capacity() <= 64);
    assert!(
        capture.tail.capacity() <= 128,
        "{}",
        capture.tail.capacity()
    );
    assert_eq!(capture.total(), 370_000);
    assert_eq!(capture.dropped(), 370_000 - 64);
}

#[test]
fn head_tail_split_character_is_a_replacement_never_a_panic() {
    // "é" is two bytes; the head (2 bytes) ends in the middle of the second one.
    let capture = head_tail(4, &["aé".as_bytes(), b"--", "éz".as_bytes()]);
    // head "a\xC3", tail "\xA9z"
    assert_eq!(
        capture.text(),
        "a\u{FFFD}\n[corral: 4 bytes dropped here]\n\u{FFFD}z"
    );
}

#[test]
fn head_tail_character_across_the_seam_is_whole_when_nothing_dropped() {
    let capture = head_tail(4, &["aéb".as_bytes()]);
    assert_eq!(capture.text(), "aéb");
}

#[test]
fn head_tail_invalid_utf8_is_lossy() {
    let capture = head_tail(100, &[b"ok \xFF\xFE done"]);
    assert_eq!(capture.text(), "ok \u{FFFD}\u{FFFD} done");
}

fn chunk(offset: u64, data: &[u8], skipped: u64) -> Chunk {
    Chunk {
        offset,
        data: data.to_vec(),
        next: offset + data.len() as u64,
        skipped,
    }
}

#[test]
fn ring_reads_from_an_offset_up_to_max() {
    let mut ring = Ring::new(100);
    ring.push(b"hello ");
    ring.push(b"world");
    assert_eq!(ring.end(), 11);
    assert_eq!(ring.read(0, 100), chunk(0, b"hello world", 0));
    assert_eq!(ring.read(6, 3), chunk(6, b"wor", 0));
    assert_eq!(ring.read(9, 3), chunk(9, b"ld", 0));
}

#[test]
fn ring_read_at_or_past_the_end_is_empty_at_the_end() {
    let mut ring = Ring::new(10);
    ring.push(b"abc");
    assert_eq!(ring.read(3, 10), chunk(3, b"", 0));
    assert_eq!(ring.read(1_000, 10), chunk(3, b"", 0));
    assert_eq!(ring.read(u64::MAX, 10), chunk(3, b"", 0));
}

#[test]
fn ring_reports_what_was_dropped_before_the_asked_offset() {
    let mut ring = Ring::new(4);
    ring.push(b"abcdef");
    ring.push(b"gh");
    // Kept: "efgh" at offsets 4..8.
    assert_eq!(ring.end(), 8);
    assert_eq!(ring.read(0, 100), chunk(4, b"efgh", 4));
    assert_eq!(ring.read(3, 2), chunk(4, b"ef", 1));
    assert_eq!(ring.read(4, 100), chunk(4, b"efgh", 0));
    assert_eq!(ring.read(7, 100), chunk(7, b"h", 0));
}

#[test]
fn ring_following_next_reads_every_kept_byte_once() {
    let mut ring = Ring::new(16);
    let mut read = Vec::new();
    let mut offset = 0;
    let mut skipped = 0;
    for round in 0..50u8 {
        ring.push(&[round; 5]);
        let got = ring.read(offset, 3);
        read.extend_from_slice(&got.data);
        skipped += got.skipped;
        offset = got.next;
    }
    assert_eq!(read.len() as u64 + skipped, offset);
    assert!(offset <= ring.end());
}

#[test]
fn ring_max_zero_reads_nothing_but_reports_the_skip() {
    let mut ring = Ring::new(2);
    ring.push(b"abc");
    assert_eq!(ring.read(0, 0), chunk(1, b"", 1));
}

#[test]
fn ring_cap_zero_keeps_only_offsets() {
    let mut ring = Ring::new(0);
    ring.push(b"abc");
    assert_eq!(ring.end(), 3);
    assert_eq!(ring.read(0, 10), chunk(3, b"", 3));
}

#[test]
fn ring_memory_stays_bounded() {
    let mut ring = Ring::new(32);
    for _ in 0..10_000 {
        ring.push(&[7; 13]);
    }
    assert!(ring.buf.capacity() <= 64);
    assert_eq!(ring.read(0, 100).data.len(), 32);
}

#[test]
fn last_lines_takes_the_last_lines() {
    assert_eq!(last_lines(b"a\nb\nc\nd", 2, 100), "c\nd");
    assert_eq!(last_lines(b"a\nb\nc\nd\n", 2, 100), "c\nd");
    assert_eq!(last_lines(b"a\nb", 5, 100), "a\nb");
    assert_eq!(last_lines(b"one line", 1, 100), "one line");
    assert_eq!(last_lines(b"a\n\n", 1, 100), "");
}

#[test]
fn last_lines_zero_or_empty_is_empty() {
    assert_eq!(last_lines(b"a\nb", 0, 100), "");
    assert_eq!(last_lines(b"a\nb", 3, 0), "");
    assert_eq!(last_lines(b"", 3, 100), "");
    assert_eq!(last_lines(b"\n", 3, 100), "");
}

#[test]
fn last_lines_cuts_at_the_front_to_max_bytes() {
    assert_eq!(last_lines(b"first\nsecond line", 2, 8), "ond line");
}

#[test]
fn last_lines_cut_never_splits_a_character() {
    // "ééé" is six bytes; five would start inside the first "é".
    assert_eq!(last_lines("ééé".as_bytes(), 1, 5), "éé");
    for max in 0..=7 {
        let text = last_lines("aéb€c😀".as_bytes(), 1, max);
        assert!(text.len() <= max, "{max}: {text:?}");
        assert!(!text.contains('\u{FFFD}'), "{max}: {text:?}");
    }
}

#[test]
fn last_lines_stays_within_max_bytes_with_invalid_utf8() {
    // Every invalid byte turns into three bytes of U+FFFD.
    for max in 0..=12 {
        let text = last_lines(b"\xFF\xFF\xFF\xFFab", 1, max);
        assert!(text.len() <= max, "{max}: {text:?}");
    }
    assert_eq!(last_lines(b"\xFFab", 1, 100), "\u{FFFD}ab");
}
