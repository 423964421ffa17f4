//! What a printed document says, before it is laid out: the letterhead, the blocks of its
//! body and its signature.

use krilla::Data;
use krilla::image::Image;

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
        logo.image().map(|_| logo).ok_or("The image cannot be read.")
    }

    /// The logo as krilla draws it, when it can be read.
    pub(super) fn image(&self) -> Option<Image> {
        let data = Data::from(self.bytes.clone());
        match self.kind {
            ImageKind::Png => Image::from_png(data, true).ok(),
            ImageKind::Jpeg => Image::from_jpeg(data, true).ok(),
        }
    }

    /// The logo's size in pixels, when it can be read.
    pub(super) fn size(&self) -> Option<(f32, f32)> {
        let (width, height) = self.image()?.size();
        (width > 0 && height > 0).then_some((width as f32, height as f32))
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
pub struct PdfError(pub(super) String);
