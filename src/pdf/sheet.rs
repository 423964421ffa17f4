//! What a printed document says, before it is laid out: the letterhead, the blocks of its
//! body and its signature.

use std::fmt;
use std::sync::Arc;

use krilla::Data;
use krilla::image::{BitsPerComponent, CustomImage, Image, ImageColorspace};

use crate::images::{self, Channels, ImageError, ImageKind, Picture};

/// A logo read whole by the bounded decoder ([`images::decode`]), ready to be drawn.
#[derive(Debug, Clone)]
pub struct Logo {
    pub kind: ImageKind,
    width: u32,
    height: u32,
    drawn: Drawn,
}

/// What the PDF embeds: a JPEG as it was sent (its own compression), a PNG as the pixels the
/// bounded decoder gave, so that krilla never decodes an image itself.
#[derive(Debug, Clone)]
enum Drawn {
    Jpeg(Data),
    Pixels(Planes),
}

impl Logo {
    /// `bytes` as a logo, decoded whole within [`images::UPLOADED`]. It decodes: call it off
    /// the async threads ([`images::decode_apart`]).
    pub fn read(bytes: Vec<u8>) -> Result<Self, ImageError> {
        let picture = images::decode(&bytes, &images::UPLOADED)?;
        let (kind, width, height) = (picture.kind, picture.width, picture.height);
        let drawn = match kind {
            ImageKind::Jpeg => Drawn::Jpeg(Data::from(bytes)),
            ImageKind::Png => Drawn::Pixels(Planes::of(picture)),
        };
        Ok(Self { kind, width, height, drawn })
    }

    /// The logo as krilla draws it.
    pub(super) fn image(&self) -> Option<Image> {
        match &self.drawn {
            Drawn::Jpeg(data) => Image::from_jpeg(data.clone(), true).ok(),
            Drawn::Pixels(planes) => Image::from_custom(planes.clone(), true).ok(),
        }
    }

    /// The logo's size in pixels.
    pub(super) fn size(&self) -> Option<(f32, f32)> {
        Some((self.width as f32, self.height as f32))
    }
}

/// A decoded image as a PDF image takes it: the colour samples, and the alpha apart.
#[derive(Clone, Hash)]
struct Planes {
    width: u32,
    height: u32,
    gray: bool,
    color: Arc<Vec<u8>>,
    alpha: Option<Arc<Vec<u8>>>,
}

impl Planes {
    fn of(picture: Picture) -> Self {
        let (width, height) = (picture.width, picture.height);
        let gray = matches!(picture.channels, Channels::Gray | Channels::GrayAlpha);
        let (color, alpha) = match picture.channels {
            Channels::Gray | Channels::Rgb => (picture.pixels, None),
            Channels::GrayAlpha | Channels::Rgba => {
                let step = picture.channels.count();
                let pixels = picture.pixels.chunks_exact(step);
                let alpha = pixels.clone().map(|pixel| pixel[step - 1]).collect();
                let color = pixels.flat_map(|pixel| pixel[..step - 1].iter().copied()).collect();
                (color, Some(alpha))
            }
        };
        Self { width, height, gray, color: Arc::new(color), alpha: alpha.map(Arc::new) }
    }
}

impl fmt::Debug for Planes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x {} pixels", self.width, self.height)
    }
}

impl CustomImage for Planes {
    fn color_channel(&self) -> &[u8] {
        &self.color
    }

    fn alpha_channel(&self) -> Option<&[u8]> {
        self.alpha.as_deref().map(Vec::as_slice)
    }

    fn bits_per_component(&self) -> BitsPerComponent {
        BitsPerComponent::Eight
    }

    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn icc_profile(&self) -> Option<&[u8]> {
        None
    }

    fn color_space(&self) -> ImageColorspace {
        if self.gray { ImageColorspace::Luma } else { ImageColorspace::Rgb }
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

/// Whether, and by whom, a document is signed in the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// Signed in the system by `signer` at `at` (as the document shows it: local time and
    /// zone).
    Signed { signer: String, at: String },
    /// Should be signed and is not: a DRAFT.
    Unsigned,
    /// Not a signed kind of document (a report).
    NotSigned,
}

/// Where a signed document is signed again by hand once printed: a line to sign on, who
/// signs it under the line (a name, then what they sign as: "Licence no. 0457731",
/// "Cashier"), and beside it a box for the clinic's stamp when the document takes one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignHere {
    /// Printed under the line; empty leaves it to be written by hand.
    pub name: String,
    pub details: Vec<String>,
    pub stamp: bool,
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
    /// Where the printed copy of a signed document is signed by hand (not on a DRAFT).
    pub sign_here: Option<SignHere>,
    /// At the foot of every page, beside the page number (when and by whom it was printed).
    pub footer: String,
}

#[derive(Debug, thiserror::Error)]
#[error("the document could not be written: {0}")]
pub struct PdfError(pub(super) String);
