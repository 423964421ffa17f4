//! Drawing laid-out pages with krilla: text in the embedded fonts, rules, shades, the logo,
//! a DRAFT mark across pages that should be signed and are not, and a footer with the page
//! number.

use std::sync::LazyLock;

use krilla::color::rgb;
use krilla::geom::{PathBuilder, Point, Rect, Size, Transform};
use krilla::image::Image;
use krilla::metadata::Metadata;
use krilla::num::NormalizedF32;
use krilla::page::PageSettings;
use krilla::paint::{Fill, Stroke};
use krilla::surface::Surface;
use krilla::text::{Font, TextDirection};
use krilla::{Data, Document};

use super::layout::{
    self, BOLD, FOOTER_BASELINE, Item, LEFT, PAGE_HEIGHT, PAGE_WIDTH, Page, REGULAR, RIGHT, Tone,
};
use super::sheet::{Letterhead, PdfError, Sheet, Signing};

/// The fonts, parsed once.
static FONTS: LazyLock<(Font, Font)> = LazyLock::new(|| {
    let font = |data: &'static [u8]| Font::new(Data::from(data), 0).expect("a font compiled in is readable");
    (font(REGULAR), font(BOLD))
});

fn font(bold: bool) -> Font {
    if bold { FONTS.1.clone() } else { FONTS.0.clone() }
}

fn fill(tone: Tone, opacity: f32) -> Fill {
    let color = match tone {
        Tone::Ink => rgb::Color::new(20, 20, 20),
        Tone::Muted => rgb::Color::new(90, 90, 90),
        Tone::Alert => rgb::Color::new(190, 20, 20),
    };
    Fill {
        paint: color.into(),
        opacity: NormalizedF32::new(opacity).unwrap_or(NormalizedF32::ONE),
        rule: Default::default(),
    }
}

fn text(surface: &mut Surface, x: f32, y: f32, size: f32, bold: bool, tone: Tone, content: &str) {
    surface.set_fill(Some(fill(tone, 1.0)));
    surface.draw_text(Point::from_xy(x, y), font(bold), size, content, false, TextDirection::Auto);
}

fn rule(surface: &mut Surface, y: f32, weight: f32) {
    let mut path = PathBuilder::new();
    path.move_to(LEFT, y);
    path.line_to(RIGHT, y);
    let Some(path) = path.finish() else { return };
    surface.set_fill(None);
    surface.set_stroke(Some(Stroke {
        paint: rgb::Color::new(120, 120, 120).into(),
        width: weight,
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
    let width = layout::face(true).width("DRAFT", size);
    let (cx, cy) = (PAGE_WIDTH / 2.0, PAGE_HEIGHT / 2.0);
    surface.push_transform(&Transform::from_rotate_at(-40.0, cx, cy));
    surface.set_fill(Some(fill(Tone::Alert, 0.18)));
    let start = Point::from_xy(cx - width / 2.0, cy + size * 0.36);
    surface.draw_text(start, font(true), size, "DRAFT", false, TextDirection::Auto);
    surface.pop();
}

fn draw_page(surface: &mut Surface, page: &Page, logo: Option<&Image>) {
    for item in page {
        match item {
            Item::Text { x, y, size, bold, tone, text: content } => {
                text(surface, *x, *y, *size, *bold, *tone, content)
            }
            Item::Rule { y, weight } => rule(surface, *y, *weight),
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
pub(super) fn write(pages: &[Page], letterhead: &Letterhead, sheet: &Sheet) -> Result<Vec<u8>, PdfError> {
    let mut document = Document::new();
    let mut metadata = Metadata::new().title(sheet.title.clone()).creator("clinic-server".to_owned());
    if !letterhead.name.is_empty() {
        metadata = metadata.authors(vec![letterhead.name.clone()]);
    }
    document.set_metadata(metadata);
    let logo = letterhead.logo.as_ref().and_then(|logo| logo.image());
    let count = pages.len();
    for (index, page) in pages.iter().enumerate() {
        let settings =
            PageSettings::from_wh(PAGE_WIDTH, PAGE_HEIGHT).ok_or_else(|| PdfError("page size".into()))?;
        let mut pdf_page = document.start_page_with(settings);
        let mut surface = pdf_page.surface();
        if sheet.signing == Signing::Unsigned {
            draft_mark(&mut surface);
        }
        draw_page(&mut surface, page, logo.as_ref());
        let number = format!("Page {} of {count}", index + 1);
        let number_x = RIGHT - layout::face(false).width(&number, 8.0);
        text(&mut surface, LEFT, FOOTER_BASELINE, 8.0, false, Tone::Muted, &sheet.footer);
        text(&mut surface, number_x, FOOTER_BASELINE, 8.0, false, Tone::Muted, &number);
        surface.finish();
        pdf_page.finish();
    }
    document.finish().map_err(|e| PdfError(format!("{e:?}")))
}
