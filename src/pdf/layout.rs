//! Where everything goes: text measured with the fonts' own advances, wrapped at word
//! boundaries, and placed on A4 pages, a new page where the last one is full (a table's
//! headings repeated on it).

use std::sync::LazyLock;

use skrifa::instance::{LocationRef, Size};
use skrifa::metrics::GlyphMetrics;
use skrifa::raw::TableProvider;
use skrifa::{FontRef, MetadataProvider};

use super::sheet::{Block, Letterhead, Sheet, Signing};

pub(super) static REGULAR: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
pub(super) static BOLD: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-Bold.ttf");

/// A4, in points.
pub(super) const PAGE_WIDTH: f32 = 595.28;
pub(super) const PAGE_HEIGHT: f32 = 841.89;
const MARGIN: f32 = 48.0;
const CONTENT_WIDTH: f32 = PAGE_WIDTH - 2.0 * MARGIN;
/// Nothing is placed below this line but the footer.
const BOTTOM: f32 = PAGE_HEIGHT - 64.0;
/// The baseline of the footer.
pub(super) const FOOTER_BASELINE: f32 = PAGE_HEIGHT - 30.0;
pub(super) const LEFT: f32 = MARGIN;
pub(super) const RIGHT: f32 = PAGE_WIDTH - MARGIN;
const LOGO_BOX: f32 = 64.0;
const LABEL_WIDTH: f32 = 150.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    Ink,
    Muted,
    Alert,
}

/// One thing drawn on a page; `y` grows downwards from the top edge, text at its baseline.
#[derive(Debug, Clone)]
pub(super) enum Item {
    Text { x: f32, y: f32, size: f32, bold: bool, tone: Tone, text: String },
    Rule { y: f32, weight: f32 },
    Shade { y: f32, height: f32 },
    Logo { x: f32, y: f32, width: f32, height: f32 },
}

pub(super) type Page = Vec<Item>;

/// A font's advances, for measuring.
pub(super) struct Face {
    font: FontRef<'static>,
    metrics: GlyphMetrics<'static>,
    units_per_em: f32,
}

impl Face {
    fn new(data: &'static [u8]) -> Self {
        let font = FontRef::new(data).expect("a font compiled in is readable");
        let metrics = font.glyph_metrics(Size::unscaled(), LocationRef::default());
        let units_per_em = font.head().map_or(1000.0, |head| head.units_per_em() as f32);
        Self { font, metrics, units_per_em }
    }

    /// The width of `text` at `size` points.
    pub(super) fn width(&self, text: &str, size: f32) -> f32 {
        let charmap = self.font.charmap();
        let units: f32 = text
            .chars()
            .map(|c| self.metrics.advance_width(charmap.map(c).unwrap_or_default()).unwrap_or_default())
            .sum();
        units * size / self.units_per_em
    }
}

pub(super) static FACES: LazyLock<(Face, Face)> = LazyLock::new(|| (Face::new(REGULAR), Face::new(BOLD)));

pub(super) fn face(bold: bool) -> &'static Face {
    if bold { &FACES.1 } else { &FACES.0 }
}

/// `text` broken into lines no wider than `width`: at spaces, and inside a word only when the
/// word alone is wider. Line breaks in `text` are kept; control characters become spaces.
pub(super) fn wrap(text: &str, size: f32, bold: bool, width: f32) -> Vec<String> {
    let face = face(bold);
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let clean: String = paragraph.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let mut line = String::new();
        for word in clean.split_whitespace() {
            let candidate = if line.is_empty() { word.to_owned() } else { format!("{line} {word}") };
            if face.width(&candidate, size) <= width {
                line = candidate;
                continue;
            }
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            // A word wider than the line is cut where it no longer fits.
            for c in word.chars() {
                line.push(c);
                if face.width(&line, size) > width && line.chars().count() > 1 {
                    line.pop();
                    lines.push(std::mem::replace(&mut line, c.to_string()));
                }
            }
        }
        lines.push(line);
    }
    lines
}

struct Layout<'a> {
    pages: Vec<Page>,
    y: f32,
    letterhead: &'a Letterhead,
    sheet: &'a Sheet,
}

impl Layout<'_> {
    fn page(&mut self) -> &mut Page {
        self.pages.last_mut().expect("a page")
    }

    fn text(&mut self, x: f32, size: f32, bold: bool, tone: Tone, text: impl Into<String>) {
        let y = self.y;
        self.page().push(Item::Text { x, y, size, bold, tone, text: text.into() });
    }

    /// Starts a new page unless `height` more fits on this one; answers whether it did.
    fn room(&mut self, height: f32) -> bool {
        if self.y + height <= BOTTOM {
            return false;
        }
        self.pages.push(Vec::new());
        // Later pages name the branch and the document in a line of their own.
        self.y = MARGIN + 8.0;
        let head = format!("{} · {}", self.letterhead.name, self.sheet.title);
        self.text(LEFT, 8.0, false, Tone::Muted, head);
        self.y += 6.0;
        self.page().push(Item::Rule { y: MARGIN + 14.0, weight: 0.5 });
        self.y += 18.0;
        true
    }

    fn letterhead(&mut self) {
        let letterhead = self.letterhead;
        let top = MARGIN;
        let mut x = LEFT;
        let mut logo_height: f32 = 0.0;
        if let Some((width, height)) = letterhead.logo.as_ref().and_then(|logo| logo.size()) {
            // The logo fits a square, keeping its proportions.
            let scale = (LOGO_BOX / width).min(LOGO_BOX / height);
            let (w, h) = (width * scale, height * scale);
            self.page().push(Item::Logo { x: LEFT, y: top, width: w, height: h });
            x += w + 14.0;
            logo_height = h;
        }
        let width = RIGHT - x;
        self.y = top + 16.0;
        for line in wrap(&letterhead.name, 16.0, true, width) {
            self.text(x, 16.0, true, Tone::Ink, line);
            self.y += 19.0;
        }
        let mut details: Vec<String> = letterhead.address.iter().cloned().collect();
        details.extend(letterhead.phone.iter().map(|phone| format!("Tel. {phone}")));
        for line in details.iter().flat_map(|d| wrap(d, 9.0, false, width)) {
            self.text(x, 9.0, false, Tone::Muted, line);
            self.y += 12.0;
        }
        let bottom = (self.y - 8.0).max(top + logo_height) + 10.0;
        self.page().push(Item::Rule { y: bottom, weight: 1.0 });
        self.y = bottom + 30.0;
    }

    fn title(&mut self) {
        let sheet = self.sheet;
        let reference_width = sheet.reference.as_ref().map_or(0.0, |r| face(false).width(r, 10.0) + 16.0);
        let lines = wrap(&sheet.title, 15.0, true, CONTENT_WIDTH - reference_width);
        if let Some(reference) = &sheet.reference {
            let x = RIGHT - face(false).width(reference, 10.0);
            self.text(x, 10.0, false, Tone::Ink, reference.clone());
        }
        for line in lines {
            self.text(LEFT, 15.0, true, Tone::Ink, line);
            self.y += 19.0;
        }
        self.y += 10.0;
    }

    fn heading(&mut self, heading: &str) {
        self.room(40.0);
        self.y += 8.0;
        for line in wrap(heading, 11.5, true, CONTENT_WIDTH) {
            self.text(LEFT, 11.5, true, Tone::Ink, line);
            self.y += 15.0;
        }
        let y = self.y - 10.0;
        self.page().push(Item::Rule { y, weight: 0.4 });
        self.y += 4.0;
    }

    fn fields(&mut self, fields: &[(String, String)]) {
        for (label, value) in fields {
            let labels = wrap(label, 9.5, true, LABEL_WIDTH - 10.0);
            let value = if value.trim().is_empty() { "—" } else { value };
            let values = wrap(value, 10.0, false, CONTENT_WIDTH - LABEL_WIDTH);
            let height = labels.len().max(values.len()) as f32 * 13.5;
            self.room(height);
            let top = self.y;
            for line in labels {
                self.text(LEFT, 9.5, true, Tone::Muted, line);
                self.y += 13.5;
            }
            self.y = top;
            for line in values {
                self.text(LEFT + LABEL_WIDTH, 10.0, false, Tone::Ink, line);
                self.y += 13.5;
            }
            self.y = top + height + 2.0;
        }
        self.y += 6.0;
    }

    fn paragraph(&mut self, text: &str) {
        for line in wrap(text, 10.0, false, CONTENT_WIDTH) {
            self.room(13.5);
            self.text(LEFT, 10.0, false, Tone::Ink, line);
            self.y += 13.5;
        }
        self.y += 6.0;
    }

    fn table_head(&mut self, columns: &[(String, f32)], widths: &[f32]) {
        let cells: Vec<Vec<String>> =
            columns.iter().zip(widths).map(|((name, _), w)| wrap(name, 8.5, true, w - 6.0)).collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1) as f32 * 11.0 + 6.0;
        let top = self.y - 11.0;
        self.page().push(Item::Shade { y: top, height });
        self.cells(&cells, widths, 8.5, true, 11.0);
        self.y = top + height + 11.0;
    }

    /// Writes a row of wrapped cells from the current baseline, leaving `y` unchanged.
    fn cells(&mut self, cells: &[Vec<String>], widths: &[f32], size: f32, bold: bool, leading: f32) {
        let top = self.y;
        let mut x = LEFT + 3.0;
        for (lines, width) in cells.iter().zip(widths) {
            self.y = top;
            for line in lines {
                self.text(x, size, bold, Tone::Ink, line.clone());
                self.y += leading;
            }
            x += width;
        }
        self.y = top;
    }

    fn table(&mut self, columns: &[(String, f32)], rows: &[Vec<String>]) {
        let total: f32 = columns.iter().map(|(_, share)| share).sum::<f32>().max(f32::EPSILON);
        let widths: Vec<f32> = columns.iter().map(|(_, share)| CONTENT_WIDTH * share / total).collect();
        self.room(40.0);
        self.y += 6.0;
        self.table_head(columns, &widths);
        for row in rows {
            let cells: Vec<Vec<String>> = widths
                .iter()
                .enumerate()
                .map(|(i, w)| wrap(row.get(i).map_or("", String::as_str), 9.0, false, w - 6.0))
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1) as f32 * 11.5 + 5.0;
            if self.room(height) {
                self.y += 6.0;
                self.table_head(columns, &widths);
            }
            self.cells(&cells, &widths, 9.0, false, 11.5);
            self.y += height;
            let y = self.y - 11.5;
            self.page().push(Item::Rule { y, weight: 0.25 });
        }
        self.y += 8.0;
    }

    fn signature(&mut self) {
        match &self.sheet.signing {
            Signing::NotSigned => {}
            Signing::Signed { signer, at } => {
                self.room(60.0);
                self.y += 18.0;
                let fields = [("Signed by".to_owned(), signer.clone()), ("Signed at".to_owned(), at.clone())];
                self.fields(&fields);
            }
            Signing::Unsigned => {
                self.room(60.0);
                self.y += 18.0;
                self.text(LEFT, 13.0, true, Tone::Alert, "DRAFT: not signed");
                self.y += 16.0;
                let note = "This document is not signed and is not valid as a signed record.";
                self.text(LEFT, 9.0, false, Tone::Muted, note);
                self.y += 14.0;
            }
        }
    }
}

/// Every page of `sheet`, with what goes where (the watermark and the footers are drawn on
/// every page once their number is known).
pub(super) fn lay_out(letterhead: &Letterhead, sheet: &Sheet) -> Vec<Page> {
    let mut layout = Layout { pages: vec![Vec::new()], y: MARGIN, letterhead, sheet };
    layout.letterhead();
    layout.title();
    for block in &sheet.blocks {
        match block {
            Block::Heading(heading) => layout.heading(heading),
            Block::Fields(fields) => layout.fields(fields),
            Block::Text(text) => layout.paragraph(text),
            Block::Table { columns, rows } => layout.table(columns, rows),
        }
    }
    layout.signature();
    layout.pages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_wraps_at_spaces_and_inside_words_too_long_for_a_line() {
        let lines = wrap("one two three four five six seven", 10.0, false, 60.0);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| face(false).width(l, 10.0) <= 60.0), "{lines:?}");
        assert_eq!(lines.join(" "), "one two three four five six seven");
        let cut = wrap(&"x".repeat(100), 10.0, false, 50.0);
        assert!(cut.len() > 1 && cut.concat() == "x".repeat(100), "{cut:?}");
        assert_eq!(wrap("a\nb", 10.0, false, 100.0), ["a", "b"]);
    }

    #[test]
    fn the_fonts_have_glyphs_for_latin_diacritics() {
        for face in [face(false), face(true)] {
            let charmap = face.font.charmap();
            let missing: String = "Peña Nguyễn Łódź Çağrı Ångström Dvořák Željko Ø ß — ·"
                .chars()
                .filter(|c| !c.is_whitespace() && charmap.map(*c).is_none())
                .collect();
            assert!(missing.is_empty(), "no glyph for {missing:?}");
        }
    }
}
