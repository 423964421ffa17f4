//! Drawing laid-out pages with krilla: text in the embedded fonts, rules, shades, the logo,
//! the line to sign on and the stamp's box, a DRAFT mark across pages that should be signed and are not, and a footer with the page
//! number.

use std::sync::LazyLock;

use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect, Size, Transform};
use krilla::image::Image;
use krilla::metadata::Metadata;
use krilla::num::NormalizedF32;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke, StrokeDash};
use krilla::surface::Surface;
use krilla::text::{Font, GlyphId, KrillaGlyph};
use krilla::{Data, Document};

use super::fonts::FONT_FILES;
use super::layout::{
    FOOTER_SIZE, Item, LEFT, Laid, PAGE_HEIGHT, PAGE_NUMBER_BASELINE, PAGE_WIDTH, Page, RIGHT, Tone,
};
use super::sheet::{Letterhead, PdfError, Sheet, Signing};
use super::text::{self, Line, Run};

/// The fonts as krilla embeds them, parsed once, in the order of `FONT_FILES`.
static FONTS: LazyLock<Vec<Font>> = LazyLock::new(|| {
    FONT_FILES
        .iter()
        .map(|file| Font::new(Data::from(file.data), 0).expect("a font compiled in is readable"))
        .collect()
});

/// How thick the outline stroked around glyphs drawn bold in a family without a bold face
/// is, as a share of the size.
const EMBOLDEN: f32 = 0.04;

fn color(tone: Tone) -> rgb::Color {
    match tone {
        Tone::Ink => rgb::Color::new(20, 20, 20),
        Tone::Muted => rgb::Color::new(90, 90, 90),
        Tone::Alert => rgb::Color::new(190, 20, 20),
    }
}

fn fill(tone: Tone, opacity: f32) -> Fill {
    Fill {
        paint: color(tone).into(),
        opacity: NormalizedF32::new(opacity).unwrap_or(NormalizedF32::ONE),
        rule: Default::default(),
    }
}

/// `line` from its left end at `x`, its baseline at `y`: each run with its glyphs as shaped.
/// Runs are written in reading order, each where it shows, and a right-to-left run word by
/// word in reading order too, so that text taken from the content in its order reads as it
/// was written.
fn text(surface: &mut Surface, x: f32, y: f32, size: f32, tone: Tone, line: &Line, opacity: f32) {
    let mut starts = Vec::with_capacity(line.runs.len());
    let mut at = x;
    for run in &line.runs {
        starts.push(at);
        at += run.advance() * size;
    }
    let mut order: Vec<usize> = (0..line.runs.len()).collect();
    order.sort_by_key(|i| line.runs[*i].start);
    for i in order {
        let run = &line.runs[i];
        let glyphs: Vec<KrillaGlyph> = run
            .glyphs
            .iter()
            .zip(run.ranges())
            .map(|(g, range)| {
                KrillaGlyph::new(GlyphId::new(g.id), g.advance, g.x_offset, g.y_offset, 0.0, range, None)
            })
            .collect();
        surface.set_fill(Some(fill(tone, opacity)));
        if run.embolden {
            surface.set_stroke(Some(Stroke {
                paint: color(tone).into(),
                width: size * EMBOLDEN,
                opacity: NormalizedF32::new(opacity).unwrap_or(NormalizedF32::ONE),
                ..Default::default()
            }));
        }
        let font = FONTS[run.font].clone();
        let mut words = words(run, &glyphs, starts[i], size);
        if run.rtl {
            words.reverse();
        }
        for (start, word) in words {
            surface.draw_glyphs(Point::from_xy(start, y), word, font.clone(), &run.text, size, false);
        }
        surface.set_stroke(None);
    }
}

/// `glyphs` of `run` cut where spaces are, each piece with where it starts, left to right.
fn words<'g>(run: &Run, glyphs: &'g [KrillaGlyph], x: f32, size: f32) -> Vec<(f32, &'g [KrillaGlyph])> {
    let mut words = Vec::new();
    let (mut start, mut from, mut at) = (x, 0, x);
    let space = |i: usize| run.text[glyphs[i].text_range.clone()].chars().all(char::is_whitespace);
    for (i, glyph) in run.glyphs.iter().enumerate() {
        if i > from && space(i) != space(i - 1) {
            words.push((start, &glyphs[from..i]));
            (start, from) = (at, i);
        }
        at += glyph.advance * size;
    }
    if from < glyphs.len() {
        words.push((start, &glyphs[from..]));
    }
    words
}

/// A line across the page from `from` to `to` at `y`, grey, or darker when signed on.
fn line(surface: &mut Surface, (from, to): (f32, f32), y: f32, weight: f32, shade: u8) {
    let mut path = PathBuilder::new();
    path.move_to(from, y);
    path.line_to(to, y);
    let Some(path) = path.finish() else { return };
    surface.set_fill(None);
    surface.set_stroke(Some(Stroke {
        paint: rgb::Color::new(shade, shade, shade).into(),
        width: weight,
        ..Default::default()
    }));
    surface.draw_path(&path);
    surface.set_stroke(None);
}

fn rule(surface: &mut Surface, y: f32, weight: f32) {
    line(surface, (LEFT, RIGHT), y, weight, 120);
}

/// A dashed box, the place of a stamp: dashed so that it reads as a place, not a border.
fn frame(surface: &mut Surface, rect: Option<Rect>) {
    let mut path = PathBuilder::new();
    let Some(rect) = rect else { return };
    path.push_rect(rect);
    let Some(path) = path.finish() else { return };
    surface.set_fill(None);
    surface.set_stroke(Some(Stroke {
        paint: rgb::Color::new(120, 120, 120).into(),
        width: 0.6,
        dash: Some(StrokeDash { array: vec![3.0, 2.5], offset: 0.0 }),
        ..Default::default()
    }));
    surface.draw_path(&path);
    surface.set_stroke(None);
}

fn shade(surface: &mut Surface, y: f32, height: f32) {
    let mut path = PathBuilder::new();
    let Some(rect) = Rect::from_xywh(LEFT, y, RIGHT - LEFT, height) else { return };
    path.push_rect(rect);
    let Some(path) = path.finish() else { return };
    surface.set_fill(Some(Fill {
        paint: rgb::Color::new(232, 232, 232).into(),
        opacity: NormalizedF32::ONE,
        rule: Default::default(),
    }));
    surface.draw_path(&path);
}

/// "DRAFT" across the middle of the page, faint, so that the page reads through it.
fn draft_mark(surface: &mut Surface) {
    let size = 110.0;
    let mark = text::line("DRAFT", true);
    let (cx, cy) = (PAGE_WIDTH / 2.0, PAGE_HEIGHT / 2.0);
    surface.push_transform(&Transform::from_rotate_at(-40.0, cx, cy));
    let (x, y) = (cx - mark.width(size) / 2.0, cy + size * 0.36);
    text(surface, x, y, size, Tone::Alert, &mark, 0.18);
    surface.pop();
}

fn draw_page(surface: &mut Surface, page: &Page, logo: Option<&Image>) {
    for item in page {
        match item {
            Item::Text { x, y, size, tone, line } => text(surface, *x, *y, *size, *tone, line, 1.0),
            Item::Rule { y, weight } => rule(surface, *y, *weight),
            Item::Line { x, y, width } => line(surface, (*x, x + width), *y, 0.8, 40),
            Item::Frame { x, y, width, height } => frame(surface, Rect::from_xywh(*x, *y, *width, *height)),
            Item::Shade { y, height } => shade(surface, *y, *height),
            Item::Logo { x, y, width, height } => {
                if let (Some(image), Some(size)) = (logo, Size::from_wh(*width, *height)) {
                    surface.push_transform(&Transform::from_translate(*x, *y));
                    surface.draw_image(image.clone(), size);
                    surface.pop();
                }
            }
        }
    }
}

/// Writes the laid-out pages as one PDF.
pub(super) fn write(laid: &Laid, letterhead: &Letterhead, sheet: &Sheet) -> Result<Vec<u8>, PdfError> {
    let mut document = Document::new();
    let mut metadata = Metadata::new().title(sheet.title.clone()).creator("clinic-server".to_owned());
    if !letterhead.name.is_empty() {
        metadata = metadata.authors(vec![letterhead.name.clone()]);
    }
    document.set_metadata(metadata);
    let logo = letterhead.logo.as_ref().and_then(|logo| logo.image());
    let count = laid.pages.len();
    for (index, page) in laid.pages.iter().enumerate() {
        let settings =
            PageSettings::from_wh(PAGE_WIDTH, PAGE_HEIGHT).ok_or_else(|| PdfError("page size".into()))?;
        let mut pdf_page = document.start_page_with(settings);
        let mut surface = pdf_page.surface();
        if sheet.signing == Signing::Unsigned {
            draft_mark(&mut surface);
        }
        draw_page(&mut surface, page, logo.as_ref());
        for (y, line) in &laid.footer {
            text(&mut surface, LEFT, *y, FOOTER_SIZE, Tone::Muted, line, 1.0);
        }
        let number = text::line(&format!("Page {} of {count}", index + 1), false);
        let number_x = RIGHT - number.width(FOOTER_SIZE);
        text(&mut surface, number_x, PAGE_NUMBER_BASELINE, FOOTER_SIZE, Tone::Muted, &number, 1.0);
        surface.finish();
        pdf_page.finish();
    }
    document.finish().map_err(|e| PdfError(format!("{e:?}")))
}
