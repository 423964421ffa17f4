//! Where everything goes: text shaped and broken into lines ([`text`]), placed on A4 pages,
//! and a new page begun wherever the last one is full, inside a block too (a table's
//! headings repeated on it), so that nothing runs past the footer.

use super::sheet::{Block, Letterhead, Sheet, SignHere, Signing};
use super::text::{self, Line};

/// A4, in points.
pub(super) const PAGE_WIDTH: f32 = 595.28;
pub(super) const PAGE_HEIGHT: f32 = 841.89;
const MARGIN: f32 = 48.0;
const CONTENT_WIDTH: f32 = PAGE_WIDTH - 2.0 * MARGIN;
/// The baseline of the footer's last line.
const FOOTER_BASELINE: f32 = PAGE_HEIGHT - 30.0;
pub(super) const FOOTER_SIZE: f32 = 8.0;
const FOOTER_LEADING: f32 = 10.0;
/// Between the body's last baseline and the footer's first.
const FOOTER_GAP: f32 = 34.0;
/// The body keeps at least this much of a page, however long the footer.
const LEAST_BOTTOM: f32 = PAGE_HEIGHT / 2.0;
pub(super) const LEFT: f32 = MARGIN;
pub(super) const RIGHT: f32 = PAGE_WIDTH - MARGIN;
const LOGO_BOX: f32 = 64.0;
const LABEL_WIDTH: f32 = 150.0;
/// The widest page number the footer leaves room for.
const WIDEST_PAGE_NUMBER: &str = "Page 9999 of 9999";
/// The line signed on by hand, and the room above it for the signature (about 2 cm).
const SIGNATURE_WIDTH: f32 = 200.0;
const SIGNATURE_ROOM: f32 = 58.0;
/// The box a clinic's stamp goes in (a round stamp of 3.5 cm fits), beside the signature.
const STAMP_WIDTH: f32 = 120.0;
const STAMP_HEIGHT: f32 = 100.0;
const STAMP_GAP: f32 = 28.0;
/// The line saying who signed the document in the system, and when.
const SIGNED_SIZE: f32 = 8.5;
const SIGNED_LEADING: f32 = 11.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    Ink,
    Muted,
    Alert,
}

/// One thing drawn on a page; `y` grows downwards from the top edge, text at its baseline.
/// A `Line` is what a signature goes on, a `Frame` (dashed) where a stamp goes.
#[derive(Debug, Clone)]
pub(super) enum Item {
    Text { x: f32, y: f32, size: f32, tone: Tone, line: Line },
    Rule { y: f32, weight: f32 },
    Line { x: f32, y: f32, width: f32 },
    Frame { x: f32, y: f32, width: f32, height: f32 },
    Shade { y: f32, height: f32 },
    Logo { x: f32, y: f32, width: f32, height: f32 },
}

pub(super) type Page = Vec<Item>;

/// The pages of a document, and its footer: lines with their baselines, drawn on every page
/// beside "Page N of M" once the number of pages is known.
pub(super) struct Laid {
    pub pages: Vec<Page>,
    pub footer: Vec<(f32, Line)>,
}

/// The baseline of the footer's page number.
pub(super) const PAGE_NUMBER_BASELINE: f32 = FOOTER_BASELINE;

struct Layout<'a> {
    pages: Vec<Page>,
    y: f32,
    /// Nothing is placed below this baseline but the footer.
    bottom: f32,
    /// The line naming the branch and the document atop every page after the first.
    running_head: Vec<Line>,
    letterhead: &'a Letterhead,
    sheet: &'a Sheet,
}

impl Layout<'_> {
    fn page(&mut self) -> &mut Page {
        self.pages.last_mut().expect("a page")
    }

    fn text(&mut self, x: f32, size: f32, tone: Tone, line: Line) {
        let y = self.y;
        self.page().push(Item::Text { x, y, size, tone, line });
    }

    /// Starts a new page unless `height` more fits on this one; answers whether it did.
    fn room(&mut self, height: f32) -> bool {
        if self.y + height <= self.bottom {
            return false;
        }
        self.pages.push(Vec::new());
        self.y = MARGIN + 8.0;
        for line in self.running_head.clone() {
            self.text(LEFT, 8.0, Tone::Muted, line);
            self.y += 10.0;
        }
        let rule = self.y - 4.0;
        self.page().push(Item::Rule { y: rule, weight: 0.5 });
        self.y += 14.0;
        true
    }

    /// How much a page holds below its running head: what is taller flows across pages.
    fn page_height(&self) -> f32 {
        self.bottom - (MARGIN + 8.0 + 10.0 * self.running_head.len() as f32 + 14.0)
    }

    /// `lines` one under the other from the current baseline, a new page where one is full.
    fn lines(&mut self, x: f32, size: f32, tone: Tone, leading: f32, lines: Vec<Line>) {
        for line in lines {
            self.room(leading);
            self.text(x, size, tone, line);
            self.y += leading;
        }
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
        self.lines(x, 16.0, Tone::Ink, 19.0, text::wrap(&letterhead.name, 16.0, true, width));
        let mut details: Vec<String> = letterhead.address.iter().cloned().collect();
        details.extend(letterhead.phone.iter().map(|phone| format!("Tel. {phone}")));
        let details = details.iter().flat_map(|d| text::wrap(d, 9.0, false, width)).collect();
        self.lines(x, 9.0, Tone::Muted, 12.0, details);
        let bottom = if self.pages.len() == 1 { (self.y - 8.0).max(top + logo_height) } else { self.y - 8.0 };
        let rule = bottom + 10.0;
        self.page().push(Item::Rule { y: rule, weight: 1.0 });
        self.y = rule + 30.0;
    }

    fn title(&mut self) {
        let sheet = self.sheet;
        let references = sheet
            .reference
            .as_deref()
            .map_or_else(Vec::new, |r| text::wrap(r, 10.0, false, CONTENT_WIDTH / 3.0));
        let reference_width = references.iter().map(|l| l.width(10.0)).fold(0.0, f32::max);
        let gap = if references.is_empty() { 0.0 } else { 16.0 };
        let lines = text::wrap(&sheet.title, 15.0, true, CONTENT_WIDTH - reference_width - gap);
        self.room(19.0);
        let (top, page) = (self.y, self.pages.len());
        // The reference beside the title, to its right, on the title's first baseline.
        for line in references {
            let x = RIGHT - line.width(10.0);
            self.text(x, 10.0, Tone::Ink, line);
            self.y += 13.0;
        }
        let below_reference = self.y;
        self.y = top;
        self.lines(LEFT, 15.0, Tone::Ink, 19.0, lines);
        if self.pages.len() == page {
            self.y = self.y.max(below_reference);
        }
        self.y += 10.0;
    }

    fn heading(&mut self, heading: &str) {
        self.room(40.0);
        self.y += 8.0;
        self.lines(LEFT, 11.5, Tone::Ink, 15.0, text::wrap(heading, 11.5, true, CONTENT_WIDTH));
        let y = self.y - 10.0;
        self.page().push(Item::Rule { y, weight: 0.4 });
        self.y += 4.0;
    }

    fn fields(&mut self, fields: &[(String, String)]) {
        const LEADING: f32 = 13.5;
        for (label, value) in fields {
            let labels = text::wrap(label, 9.5, true, LABEL_WIDTH - 10.0);
            let value = if value.trim().is_empty() { "—" } else { value };
            let values = text::wrap(value, 10.0, false, CONTENT_WIDTH - LABEL_WIDTH);
            let count = labels.len().max(values.len());
            // A field of a few lines is kept together; a longer one flows across pages.
            let height = count as f32 * LEADING;
            if height <= self.page_height() / 2.0 {
                self.room(height);
            }
            let (mut labels, mut values) = (labels.into_iter(), values.into_iter());
            for _ in 0..count {
                self.room(LEADING);
                if let Some(line) = labels.next() {
                    self.text(LEFT, 9.5, Tone::Muted, line);
                }
                if let Some(line) = values.next() {
                    self.text(LEFT + LABEL_WIDTH, 10.0, Tone::Ink, line);
                }
                self.y += LEADING;
            }
            self.y += 2.0;
        }
        self.y += 6.0;
    }

    fn paragraph(&mut self, paragraph: &str) {
        self.lines(LEFT, 10.0, Tone::Ink, 13.5, text::wrap(paragraph, 10.0, false, CONTENT_WIDTH));
        self.y += 6.0;
    }

    fn table_head(&mut self, columns: &[(String, f32)], widths: &[f32]) {
        let cells: Vec<Vec<Line>> =
            columns.iter().zip(widths).map(|((name, _), w)| text::wrap(name, 8.5, true, w - 6.0)).collect();
        let count = cells.iter().map(Vec::len).max().unwrap_or(1);
        let height = count as f32 * 11.0 + 6.0;
        let top = self.y - 11.0;
        self.page().push(Item::Shade { y: top, height });
        self.row_line(cells, widths, 8.5, 11.0);
        self.y = top + height + 11.0;
    }

    /// Writes the lines of a row's cells one under the other from the current baseline,
    /// leaving `y` under the last.
    fn row_line(&mut self, cells: Vec<Vec<Line>>, widths: &[f32], size: f32, leading: f32) {
        let count = cells.iter().map(Vec::len).max().unwrap_or(0);
        let mut cells: Vec<_> = cells.into_iter().map(Vec::into_iter).collect();
        for _ in 0..count {
            let mut x = LEFT + 3.0;
            for (lines, width) in cells.iter_mut().zip(widths) {
                if let Some(line) = lines.next() {
                    self.text(x, size, Tone::Ink, line);
                }
                x += width;
            }
            self.y += leading;
        }
    }

    /// Writes a row kept on one page cell by cell, each cell's lines one under the other, so
    /// that the text reads (and copies, and extracts) a whole cell before the next.
    fn row_cells(&mut self, cells: Vec<Vec<Line>>, widths: &[f32], size: f32, leading: f32) {
        let (top, count) = (self.y, cells.iter().map(Vec::len).max().unwrap_or(0));
        let mut x = LEFT + 3.0;
        for (lines, width) in cells.into_iter().zip(widths) {
            self.y = top;
            for line in lines {
                self.text(x, size, Tone::Ink, line);
                self.y += leading;
            }
            x += width;
        }
        self.y = top + count as f32 * leading;
    }

    fn table(&mut self, columns: &[(String, f32)], rows: &[Vec<String>]) {
        const LEADING: f32 = 11.5;
        let total: f32 = columns.iter().map(|(_, share)| share).sum::<f32>().max(f32::EPSILON);
        let widths: Vec<f32> = columns.iter().map(|(_, share)| CONTENT_WIDTH * share / total).collect();
        self.room(40.0);
        self.y += 6.0;
        self.table_head(columns, &widths);
        for row in rows {
            let cells: Vec<Vec<Line>> = widths
                .iter()
                .enumerate()
                .map(|(i, w)| text::wrap(row.get(i).map_or("", String::as_str), 9.0, false, w - 6.0))
                .collect();
            let count = cells.iter().map(Vec::len).max().unwrap_or(1);
            // A row of a few lines is kept together; a longer one flows across pages, its
            // cells side by side, the headings repeated on each page.
            let height = count as f32 * LEADING + 5.0;
            let kept_together = height <= self.page_height() / 2.0;
            if kept_together && self.room(height) {
                self.y += 6.0;
                self.table_head(columns, &widths);
            }
            if kept_together {
                self.row_cells(cells, &widths, 9.0, LEADING);
            } else {
                let mut cells: Vec<_> = cells.into_iter().map(Vec::into_iter).collect();
                for _ in 0..count {
                    if self.room(LEADING) {
                        self.y += 6.0;
                        self.table_head(columns, &widths);
                    }
                    let line: Vec<Vec<Line>> =
                        cells.iter_mut().map(|c| c.next().into_iter().collect()).collect();
                    self.row_line(line, &widths, 9.0, LEADING);
                }
            }
            self.y += 5.0;
            let y = self.y - LEADING;
            self.page().push(Item::Rule { y, weight: 0.25 });
        }
        self.y += 8.0;
    }

    /// The end of a signed kind of document: a DRAFT note while it is not signed; once it
    /// is, the place where its printed copy is signed by hand (when it declares one) and who
    /// signed it in the system, kept together on one page.
    fn signature(&mut self) {
        let sheet = self.sheet;
        let signed = match &sheet.signing {
            Signing::Unsigned => return self.draft_note(),
            Signing::NotSigned => Vec::new(),
            Signing::Signed { signer, at } => {
                let said = format!("Signed in the system by {signer} on {at}");
                text::wrap(&said, SIGNED_SIZE, false, CONTENT_WIDTH)
            }
        };
        let sign_here = sheet.sign_here.as_ref().map(|place| self.sign_here_lines(place));
        if signed.is_empty() && sign_here.is_none() {
            return;
        }
        let place_height = sign_here.as_ref().map_or(0.0, |lines| lines.height + 14.0);
        self.room(24.0 + place_height + signed.len() as f32 * SIGNED_LEADING);
        self.y += 24.0;
        if let (Some(place), Some(lines)) = (&sheet.sign_here, sign_here) {
            self.sign_here(place, lines);
            self.y += 14.0;
        }
        self.lines(LEFT, SIGNED_SIZE, Tone::Muted, SIGNED_LEADING, signed);
    }

    fn draft_note(&mut self) {
        self.room(60.0);
        self.y += 18.0;
        let mark = text::wrap("DRAFT: not signed", 13.0, true, CONTENT_WIDTH);
        self.lines(LEFT, 13.0, Tone::Alert, 16.0, mark);
        let note = "This document is not signed and is not valid as a signed record.";
        self.lines(LEFT, 9.0, Tone::Muted, 14.0, text::wrap(note, 9.0, false, CONTENT_WIDTH));
    }

    /// What goes under the signature line, and how tall the place to sign is.
    fn sign_here_lines(&self, place: &SignHere) -> SignHereLines {
        // Without a name, the line says what to write on it.
        let named = !place.name.trim().is_empty();
        let name = if named { place.name.as_str() } else { "Signature over printed name" };
        let name = text::wrap(name, if named { 10.0 } else { 8.5 }, named, SIGNATURE_WIDTH);
        let details: Vec<Line> =
            place.details.iter().flat_map(|d| text::wrap(d, 8.5, false, SIGNATURE_WIDTH)).collect();
        let signature =
            SIGNATURE_ROOM + 14.0 + 13.0 * (name.len().max(1) - 1) as f32 + 11.0 * details.len() as f32;
        let stamp = if place.stamp { STAMP_HEIGHT + 14.0 } else { 0.0 };
        SignHereLines { name, named, details, height: signature.max(stamp) }
    }

    /// The place to sign by hand, from the current `y` as its top: the line with the name
    /// and details centred under it, and the stamp's box to its right with its label under
    /// it; `y` is left under the taller of the two.
    fn sign_here(&mut self, place: &SignHere, lines: SignHereLines) {
        let top = self.y;
        let right = if place.stamp { RIGHT - STAMP_WIDTH - STAMP_GAP } else { RIGHT };
        let left = right - SIGNATURE_WIDTH;
        let centred = |line: &Line, size: f32| left + (SIGNATURE_WIDTH - line.width(size)) / 2.0;
        let rule = top + SIGNATURE_ROOM;
        self.page().push(Item::Line { x: left, y: rule, width: SIGNATURE_WIDTH });
        self.y = rule + 14.0;
        let (size, tone) = if lines.named { (10.0, Tone::Ink) } else { (8.5, Tone::Muted) };
        for line in lines.name {
            self.text(centred(&line, size), size, tone, line);
            self.y += 13.0;
        }
        self.y -= 2.0;
        for line in lines.details {
            self.text(centred(&line, 8.5), 8.5, Tone::Muted, line);
            self.y += 11.0;
        }
        if place.stamp {
            let x = RIGHT - STAMP_WIDTH;
            self.page().push(Item::Frame { x, y: top, width: STAMP_WIDTH, height: STAMP_HEIGHT });
            let label = text::line("Clinic stamp", false);
            let y = top + STAMP_HEIGHT + 12.0;
            let label_x = x + (STAMP_WIDTH - label.width(8.5)) / 2.0;
            self.page().push(Item::Text { x: label_x, y, size: 8.5, tone: Tone::Muted, line: label });
        }
        self.y = top + lines.height;
    }
}

/// The lines under a signature line, laid out before the place is, to know its height.
struct SignHereLines {
    name: Vec<Line>,
    named: bool,
    details: Vec<Line>,
    height: f32,
}

/// The footer's lines with their baselines, the last on the footer's baseline, wrapped to
/// leave room for the page number beside them.
fn footer(sheet: &Sheet) -> Vec<(f32, Line)> {
    let number_width = text::line(WIDEST_PAGE_NUMBER, false).width(FOOTER_SIZE) + 12.0;
    let lines = text::wrap(&sheet.footer, FOOTER_SIZE, false, CONTENT_WIDTH - number_width);
    let first = FOOTER_BASELINE - FOOTER_LEADING * (lines.len().max(1) - 1) as f32;
    lines.into_iter().enumerate().map(|(i, line)| (first + FOOTER_LEADING * i as f32, line)).collect()
}

/// Every page of `sheet`, with what goes where, and its footer (the watermark and the
/// footers are drawn on every page once their number is known).
pub(super) fn lay_out(letterhead: &Letterhead, sheet: &Sheet) -> Laid {
    let footer = footer(sheet);
    let footer_top = footer.first().map_or(FOOTER_BASELINE, |(y, _)| *y);
    let running_head =
        text::wrap(&format!("{} · {}", letterhead.name, sheet.title), 8.0, false, CONTENT_WIDTH);
    let mut layout = Layout {
        pages: vec![Vec::new()],
        y: MARGIN,
        bottom: (footer_top - FOOTER_GAP).max(LEAST_BOTTOM),
        running_head,
        letterhead,
        sheet,
    };
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
    Laid { pages: layout.pages, footer }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
