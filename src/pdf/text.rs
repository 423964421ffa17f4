//! Text as it is printed: each character in a font that has it ([`fonts`]), runs put in
//! order by the Unicode bidirectional algorithm, shaped by rustybuzz, and broken into lines
//! that are measured by the very glyphs that are drawn, so a line never runs past its width.

use std::ops::Range;

use rustybuzz::{Direction, UnicodeBuffer};
use unicode_bidi::ParagraphBidiInfo;
use unicode_script::{Script, UnicodeScript};

use super::fonts::{self, Choice, FontId};

/// What is drawn in place of a character no font has.
const REPLACEMENT: char = '\u{FFFD}';

/// One glyph as shaped; lengths are in ems.
#[derive(Debug, Clone, Copy)]
pub(super) struct Glyph {
    pub id: u32,
    pub advance: f32,
    pub x_offset: f32,
    pub y_offset: f32,
    /// Where the characters it shows start in its run's text (bytes).
    pub cluster: usize,
}

/// Glyphs of one font and one direction, in the order they are drawn (left to right).
#[derive(Debug, Clone)]
pub(super) struct Run {
    pub font: FontId,
    /// Drawn bold by stroking the outlines (a family without a bold face).
    pub embolden: bool,
    /// Shaped right to left: its glyphs come last character first.
    pub rtl: bool,
    /// Where its text starts in the paragraph: its place in reading order.
    pub start: usize,
    /// The characters it shows, in logical order.
    pub text: String,
    pub glyphs: Vec<Glyph>,
}

impl Run {
    /// The width in ems.
    pub fn advance(&self) -> f32 {
        self.glyphs.iter().map(|g| g.advance).sum()
    }

    /// The characters each glyph shows, as a range of `text`: from its cluster to the next
    /// cluster (glyphs of a right-to-left run come last character first).
    pub fn ranges(&self) -> Vec<Range<usize>> {
        let mut starts: Vec<usize> = self.glyphs.iter().map(|g| g.cluster).collect();
        starts.sort_unstable();
        starts.dedup();
        self.glyphs
            .iter()
            .map(|g| {
                let end = starts.iter().copied().find(|s| *s > g.cluster).unwrap_or(self.text.len());
                g.cluster..end
            })
            .collect()
    }
}

/// One printed line: its text in logical order and its runs in visual order.
#[derive(Debug, Clone)]
pub(super) struct Line {
    /// What the line says (the tests read it back).
    #[cfg_attr(not(test), expect(dead_code))]
    pub text: String,
    pub runs: Vec<Run>,
}

impl Line {
    /// The width in points at `size`.
    pub fn width(&self, size: f32) -> f32 {
        self.runs.iter().map(Run::advance).sum::<f32>() * size
    }
}

/// A paragraph (no line breaks in it) with its fonts and embedding levels worked out once.
struct Paragraph<'a> {
    text: &'a str,
    bold: bool,
    /// The choice of font for the character starting at each byte (others are unused).
    choices: Vec<Choice>,
    bidi: ParagraphBidiInfo<'a>,
}

impl<'a> Paragraph<'a> {
    fn new(text: &'a str, bold: bool) -> Self {
        let mut choices = vec![Choice { font: 0, replaced: false }; text.len()];
        for ((at, _), choice) in text.char_indices().zip(fonts::choose(text, bold)) {
            choices[at] = choice;
        }
        Self { text, bold, choices, bidi: ParagraphBidiInfo::new(text, None) }
    }

    /// `range` split where the font changes, in logical order.
    fn font_runs(&self, range: Range<usize>) -> Vec<Range<usize>> {
        let mut runs = Vec::new();
        let mut run_start = range.start;
        for (offset, _) in self.text[range.clone()].char_indices().skip(1) {
            let at = range.start + offset;
            if self.choices[at].font != self.choices[run_start].font {
                runs.push(run_start..at);
                run_start = at;
            }
        }
        if !range.is_empty() {
            runs.push(run_start..range.end);
        }
        runs
    }

    fn shape(&self, range: Range<usize>, rtl: bool) -> Run {
        let font = self.choices[range.start].font;
        let text = &self.text[range.clone()];
        let mut buffer = UnicodeBuffer::new();
        for (offset, c) in text.char_indices() {
            let shown = if self.choices[range.start + offset].replaced { REPLACEMENT } else { c };
            buffer.add(shown, offset as u32);
        }
        buffer.guess_segment_properties();
        buffer.set_direction(if rtl { Direction::RightToLeft } else { Direction::LeftToRight });
        let face = fonts::face(font);
        let shaped = rustybuzz::shape(face, &[], buffer);
        let em = face.units_per_em() as f32;
        let glyphs = shaped
            .glyph_infos()
            .iter()
            .zip(shaped.glyph_positions())
            .map(|(info, position)| Glyph {
                id: info.glyph_id,
                advance: position.x_advance as f32 / em,
                x_offset: position.x_offset as f32 / em,
                y_offset: position.y_offset as f32 / em,
                cluster: info.cluster as usize,
            })
            .collect();
        Run {
            font,
            embolden: fonts::emboldened(font, self.bold),
            rtl,
            start: range.start,
            text: text.to_owned(),
            glyphs,
        }
    }

    /// The line `range` of the paragraph, its runs in visual order.
    fn line(&self, range: Range<usize>) -> Line {
        let mut runs = Vec::new();
        if !range.is_empty() {
            let (levels, level_runs) = self.bidi.visual_runs(range.clone());
            for level_run in level_runs {
                let rtl = levels[level_run.start].is_rtl();
                let mut shaped: Vec<Run> =
                    self.font_runs(level_run).into_iter().map(|r| self.shape(r, rtl)).collect();
                if rtl {
                    shaped.reverse();
                }
                runs.extend(shaped);
            }
        }
        Line { text: self.text[range].to_owned(), runs }
    }

    /// The advance (ems) of the cluster starting at each byte, from shaping the whole
    /// paragraph, and whether a cluster starts there (a line may be cut only there).
    fn advances(&self) -> (Vec<f32>, Vec<bool>) {
        let mut advance = vec![0.0; self.text.len() + 1];
        let mut starts = vec![false; self.text.len() + 1];
        let mut level_start = 0;
        let levels = &self.bidi.levels;
        for at in (1..=self.text.len()).filter(|at| self.text.is_char_boundary(*at)) {
            if at < self.text.len() && levels[at] == levels[level_start] {
                continue;
            }
            let rtl = levels[level_start].is_rtl();
            for range in self.font_runs(level_start..at) {
                for glyph in self.shape(range.clone(), rtl).glyphs {
                    advance[range.start + glyph.cluster] += glyph.advance;
                    starts[range.start + glyph.cluster] = true;
                }
            }
            level_start = at;
        }
        starts[self.text.len()] = true;
        (advance, starts)
    }
}

/// Where a line may end (`end`, spaces before it left out) and the next begin (`next`).
#[derive(Debug, Clone, Copy)]
struct Break {
    end: usize,
    next: usize,
}

/// Ideographs and kana: a line may break between any two of them.
fn breaks_around(c: char) -> bool {
    matches!(c.script(), Script::Han | Script::Hiragana | Script::Katakana)
}

/// The places a line of `text` may break: after spaces and between ideographs.
fn breaks(text: &str, starts: &[bool]) -> Vec<Break> {
    let mut breaks = Vec::new();
    let mut previous: Option<char> = None;
    let mut space_from: Option<usize> = None;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() {
            space_from.get_or_insert(at);
        } else if let Some(end) = space_from.take() {
            breaks.push(Break { end, next: at });
        } else if previous.is_some_and(|p| breaks_around(p) || breaks_around(c)) && starts[at] {
            breaks.push(Break { end: at, next: at });
        }
        previous = Some(c);
    }
    let end = space_from.unwrap_or(text.len());
    breaks.push(Break { end, next: text.len() });
    breaks
}

/// `text` as lines no wider than `width` points at `size`: broken at spaces and between
/// ideographs, and inside a word (between its clusters) only where the word alone is wider.
/// Line breaks in `text` are kept; other control characters become spaces. Nothing is left
/// out but the spaces where a line breaks.
pub(super) fn wrap(text: &str, size: f32, bold: bool, width: f32) -> Vec<Line> {
    let ems = (width / size).max(0.0);
    let clean: String = text
        .chars()
        .map(|c| match c {
            '\u{2028}' | '\u{2029}' => '\n',
            c if c.is_control() && c != '\n' => ' ',
            c => c,
        })
        .collect();
    clean.split('\n').flat_map(|paragraph| wrap_paragraph(paragraph, bold, ems)).collect()
}

fn wrap_paragraph(text: &str, bold: bool, ems: f32) -> Vec<Line> {
    let paragraph = Paragraph::new(text, bold);
    let (advance, starts) = paragraph.advances();
    let mut sum = Vec::with_capacity(advance.len() + 1);
    sum.push(0.0f32);
    for a in &advance {
        sum.push(sum.last().copied().unwrap_or_default() + a);
    }
    let estimate = |from: usize, to: usize| sum[to] - sum[from];
    let breaks = breaks(text, &starts);
    let mut lines = Vec::new();
    let mut start = text.len() - text.trim_start().len();
    let mut next_break = 0;
    while start < text.len() {
        while breaks[next_break].end <= start && next_break + 1 < breaks.len() {
            next_break += 1;
        }
        // The farthest break whose line fits, by the paragraph's shaping.
        let mut chosen: Option<Break> = None;
        for candidate in &breaks[next_break..] {
            if candidate.end > start && estimate(start, candidate.end) > ems {
                break;
            }
            chosen = Some(*candidate);
        }
        let mut cut = match chosen {
            Some(found) if found.end > start => found,
            // A word wider than the line: cut between its clusters.
            _ => cut_word(start, &starts, |to| estimate(start, to) <= ems),
        };
        // The line as drawn: shaped on its own, it may differ at its ends.
        let mut line = paragraph.line(start..cut.end);
        while line.width(1.0) > ems {
            let Some(earlier) = earlier_cut(start, cut.end, &breaks, &starts) else { break };
            cut = earlier;
            line = paragraph.line(start..cut.end);
        }
        lines.push(line);
        start = cut.next;
        while let Some(c) = text[start..].chars().next().filter(|c| c.is_whitespace()) {
            start += c.len_utf8();
        }
    }
    if lines.is_empty() {
        lines.push(Line { text: String::new(), runs: Vec::new() });
    }
    lines
}

/// The farthest cluster boundary after `start` where `fits`, or the first one (a line holds
/// at least one cluster).
fn cut_word(start: usize, starts: &[bool], fits: impl Fn(usize) -> bool) -> Break {
    let boundaries = (start + 1..starts.len()).filter(|at| starts[*at]);
    let mut chosen = None;
    for at in boundaries {
        if chosen.is_some() && !fits(at) {
            break;
        }
        chosen = Some(at);
    }
    let end = chosen.unwrap_or(starts.len() - 1);
    Break { end, next: end }
}

/// The latest break or cluster boundary between `start` and `end`, both excluded.
fn earlier_cut(start: usize, end: usize, breaks: &[Break], starts: &[bool]) -> Option<Break> {
    let by_break = breaks.iter().rev().find(|b| b.end > start && b.end < end).copied();
    let by_cluster = (start + 1..end).rev().find(|at| starts[*at]).map(|at| Break { end: at, next: at });
    match (by_break, by_cluster) {
        (Some(b), Some(c)) => Some(if b.end >= c.end { b } else { c }),
        (b, c) => b.or(c),
    }
}

/// `text` on one line, however wide.
pub(super) fn line(text: &str, bold: bool) -> Line {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let paragraph = Paragraph::new(&clean, bold);
    paragraph.line(0..clean.len())
}
