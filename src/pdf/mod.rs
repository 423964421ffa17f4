//! Printed documents: what a page says ([`Sheet`]: a title, fields, paragraphs, tables and a
//! signature) under a branch's [`Letterhead`], laid out on A4 pages and written as PDF.
//!
//! krilla writes the PDF: it shapes the text, embeds the fonts as subsets and maps every glyph
//! back to its characters, so that the text can be copied and extracted. The fonts (DejaVu
//! Sans, under `assets/fonts/` with their licence) are compiled in and cover Latin scripts
//! with their diacritics. A document that should be signed and is not carries a DRAFT mark
//! across every page and in place of the signature.

mod draw;
mod layout;

/// A PNG or a JPEG image, checked to be one.
#[derive(Debug, Clone)]
pub struct Logo {
    pub bytes: Vec<u8>,
    pub kind: ImageKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
}

impl ImageKind {
    /// The kind of image `bytes` hold, by their signature.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else {
            None
        }
    }

    pub fn media_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
        }
    }

    pub fn of_media_type(media_type: &str) -> Option<Self> {
        match media_type {
            "image/png" => Some(Self::Png),
            "image/jpeg" => Some(Self::Jpeg),
            _ => None,
        }
    }
}

impl Logo {
    /// `bytes` as a logo, when they are a PNG or a JPEG that can be drawn (its size read).
    pub fn decode(bytes: Vec<u8>) -> Result<Self, &'static str> {
        let kind = ImageKind::sniff(&bytes).ok_or("The logo must be a PNG or a JPEG image.")?;
        let logo = Self { bytes, kind };
        draw::image(&logo).map(|_| logo).ok_or("The image cannot be read.")
    }
}

/// What a branch prints at the top of its documents.
#[derive(Debug, Clone, Default)]
pub struct Letterhead {
    pub name: String,
    pub address: Option<String>,
    pub phone: Option<String>,
    pub logo: Option<Logo>,
}

/// Whether, and by whom, a document is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// Signed by `signer` at `at` (as the document shows it: local time and zone).
    Signed { signer: String, at: String },
    /// Should be signed and is not: a DRAFT.
    Unsigned,
    /// Not a signed kind of document (a report).
    NotSigned,
}

/// A part of a page's body, in reading order.
#[derive(Debug, Clone)]
pub enum Block {
    /// A section heading.
    Heading(String),
    /// Labels and their values, one pair a row; long values wrap.
    Fields(Vec<(String, String)>),
    /// Text; line breaks in it are kept.
    Text(String),
    /// A table: column headings with their share of the width, and rows of cells.
    Table { columns: Vec<(String, f32)>, rows: Vec<Vec<String>> },
}

/// One document.
#[derive(Debug, Clone)]
pub struct Sheet {
    pub title: String,
    /// Beside the title, to its right: the document's number.
    pub reference: Option<String>,
    pub blocks: Vec<Block>,
    pub signing: Signing,
    /// At the foot of every page, beside the page number (when and by whom it was printed).
    pub footer: String,
}

#[derive(Debug, thiserror::Error)]
#[error("the document could not be written: {0}")]
pub struct PdfError(String);

/// The document as PDF bytes. Takes a few milliseconds of CPU: call it off the async threads.
pub fn render(letterhead: &Letterhead, sheet: &Sheet) -> Result<Vec<u8>, PdfError> {
    let pages = layout::lay_out(letterhead, sheet);
    draw::write(&pages, letterhead, sheet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_signature() {
        assert_eq!(ImageKind::sniff(b"\x89PNG\r\n\x1a\n...."), Some(ImageKind::Png));
        assert_eq!(ImageKind::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(ImageKind::Jpeg));
        assert_eq!(ImageKind::sniff(b"GIF89a"), None);
        assert!(Logo::decode(b"\x89PNG\r\n\x1a\nnot really".to_vec()).is_err());
    }

    #[test]
    fn a_long_document_is_written_on_several_pages() {
        let rows = (0..200).map(|i| vec![format!("row {i}"), "Nguyễn Thị Peña".to_owned()]).collect();
        let sheet = Sheet {
            title: "Report".into(),
            reference: Some("R-1".into()),
            blocks: vec![Block::Table { columns: vec![("A".into(), 1.0), ("B".into(), 2.0)], rows }],
            signing: Signing::NotSigned,
            footer: "printed".into(),
        };
        let pages = layout::lay_out(&Letterhead { name: "Main".into(), ..Default::default() }, &sheet);
        assert!(pages.len() > 3, "{} pages", pages.len());
        let pdf = render(&Letterhead::default(), &sheet).unwrap();
        assert!(pdf.starts_with(b"%PDF-"));
    }
}
