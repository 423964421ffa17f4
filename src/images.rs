//! The one decoder for images the server is sent (a branch's logo, an attachment's thumbnail): PNG
//! and JPEG, refused by the dimensions their headers declare before a pixel is allocated, and
//! decoded whole, so that an image kept is one that reads to its last byte. Decodes run off
//! the async threads, [`DECODES_AT_ONCE`] at a time, so that the memory bound of one decode
//! also bounds what decoding takes of the process.

use std::fmt;
use std::io::Cursor;

use tokio::sync::Semaphore;

/// What a decode may take: the bounds are checked against the header before anything is
/// allocated for the pixels, and the decoders are held to `bytes` while they work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The longest side, in pixels.
    pub side: u32,
    /// Width times height.
    pub pixels: u64,
    /// Memory for the image's samples as it declares them, and for what they decode to.
    pub bytes: u64,
}

/// Images sent to the server: a 16-megapixel photo fits; its 64 MiB bound is what one such
/// photo decodes to at 8 bits in four channels.
pub const UPLOADED: Bounds = Bounds { side: 16_384, pixels: 4096 * 4096, bytes: 64 * 1024 * 1024 };

/// Decodes running at once, each within its bounds.
pub const DECODES_AT_ONCE: usize = 2;

static DECODES: Semaphore = Semaphore::const_new(DECODES_AT_ONCE);

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

/// The channels of a decoded pixel, 8 bits each, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    Gray,
    GrayAlpha,
    Rgb,
    Rgba,
}

impl Channels {
    pub fn count(self) -> usize {
        match self {
            Self::Gray => 1,
            Self::GrayAlpha => 2,
            Self::Rgb => 3,
            Self::Rgba => 4,
        }
    }
}

/// A decoded image: its pixels row by row, 8 bits a channel.
#[derive(Clone, PartialEq, Eq)]
pub struct Picture {
    pub kind: ImageKind,
    pub width: u32,
    pub height: u32,
    pub channels: Channels,
    pub pixels: Vec<u8>,
}

impl fmt::Debug for Picture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} x {} {:?}", self.kind, self.width, self.height, self.channels)
    }
}

/// Why an image was refused. The messages speak to whoever sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("The image must be a PNG or a JPEG.")]
    NotAnImage,
    /// `size` as the header declares it, when it was read.
    #[error("The image is {size}; at most {side} pixels a side and {pixels} pixels in all are taken.")]
    TooManyPixels { size: String, side: u32, pixels: u64 },
    #[error("The image needs {needed_mib} MiB to decode; at most {bound_mib} MiB are taken.")]
    TooMuchMemory { needed_mib: u64, bound_mib: u64 },
    #[error("The image cannot be read: {0}.")]
    Unreadable(String),
}

impl ImageError {
    /// A stable name for the reason, for logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotAnImage => "image_type",
            Self::TooManyPixels { .. } => "image_pixels",
            Self::TooMuchMemory { .. } => "image_memory",
            Self::Unreadable(_) => "image_unreadable",
        }
    }
}

fn unreadable(error: impl fmt::Display) -> ImageError {
    let message = error.to_string();
    let message = message.trim_matches(|c: char| c.is_whitespace() || c == '"' || c == '.');
    ImageError::Unreadable(if message.is_empty() { "it is damaged".to_owned() } else { message.to_owned() })
}

impl Bounds {
    fn check_size(&self, width: u32, height: u32) -> Result<(), ImageError> {
        let pixels = u64::from(width) * u64::from(height);
        if width == 0 || height == 0 {
            return Err(ImageError::Unreadable("it has no pixels".to_owned()));
        }
        if width > self.side || height > self.side || pixels > self.pixels {
            return Err(self.too_many_pixels(format!("{width} x {height} pixels")));
        }
        Ok(())
    }

    fn too_many_pixels(&self, size: String) -> ImageError {
        ImageError::TooManyPixels { size, side: self.side, pixels: self.pixels }
    }

    fn check_memory(&self, needed: u64) -> Result<(), ImageError> {
        const MIB: u64 = 1024 * 1024;
        if needed > self.bytes {
            return Err(ImageError::TooMuchMemory {
                needed_mib: needed.div_ceil(MIB),
                bound_mib: self.bytes / MIB,
            });
        }
        Ok(())
    }
}

/// Decodes `bytes`, a PNG or a JPEG, whole, within `bounds`. Call it off the async threads
/// ([`decode_apart`]).
pub fn decode(bytes: &[u8], bounds: &Bounds) -> Result<Picture, ImageError> {
    match ImageKind::sniff(bytes).ok_or(ImageError::NotAnImage)? {
        ImageKind::Png => decode_png(bytes, bounds),
        ImageKind::Jpeg => decode_jpeg(bytes, bounds),
    }
}

/// Runs `work` (a decode and what is made of it) on a blocking thread once one of the
/// [`DECODES_AT_ONCE`] turns is free. A decoder that panics on its input refuses the image.
pub async fn decode_apart<T, F>(work: F) -> Result<T, ImageError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ImageError> + Send + 'static,
{
    let _turn = DECODES.acquire().await.map_err(|_| unreadable("the server is stopping"))?;
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|_| Err(unreadable("its data is damaged")))
}

/// A PNG of `bytes` (a PNG, JPEG or TIFF) at most `longest` pixels on its longest side,
/// decoded by the `image` crate held to `bounds` (`image::Limits`): an image that declares
/// more pixels or memory than they allow is refused before its pixels are allocated. Call it
/// off the async threads ([`decode_apart`]).
pub fn thumbnail(bytes: &[u8], bounds: &Bounds, longest: u32) -> Result<Vec<u8>, ImageError> {
    use image::ImageDecoder;

    let mut reader = image::ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(unreadable)?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(bounds.side);
    limits.max_image_height = Some(bounds.side);
    limits.max_alloc = Some(bounds.bytes);
    reader.limits(limits);
    let limited = |error: image::ImageError| match error {
        image::ImageError::Limits(_) => bounds.too_many_pixels("over the bounds".to_owned()),
        other => unreadable(other),
    };
    let decoder = reader.into_decoder().map_err(limited)?;
    let (width, height) = decoder.dimensions();
    bounds.check_size(width, height)?;
    bounds.check_memory(decoder.total_bytes())?;
    let image = image::DynamicImage::from_decoder(decoder).map_err(limited)?;
    // Never larger than the image itself.
    let fitted = if width.max(height) > longest { image.thumbnail(longest, longest) } else { image };
    let small = image::DynamicImage::ImageRgba8(fitted.to_rgba8());
    let mut out = Vec::new();
    small.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png).map_err(unreadable)?;
    Ok(out)
}

fn decode_png(bytes: &[u8], bounds: &Bounds) -> Result<Picture, ImageError> {
    let limits = png::Limits { bytes: usize::try_from(bounds.bytes).unwrap_or(usize::MAX) };
    let mut decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    decoder.ignore_checksums(false);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let header = decoder.read_header_info().map_err(unreadable)?;
    bounds.check_size(header.width, header.height)?;
    let pixels = u64::from(header.width) * u64::from(header.height);
    // The samples as declared (16 bits a channel, maybe) are inflated row by row, and each
    // pixel is written out at 8 bits in up to four channels: the larger must fit.
    let declared = (pixels * header.bits_per_pixel() as u64).div_ceil(8);
    bounds.check_memory(declared.max(pixels * 4))?;
    let mut reader = decoder.read_info().map_err(unreadable)?;
    let size = reader.output_buffer_size().ok_or_else(|| unreadable("its size overflows"))?;
    let mut buffer = vec![0; size];
    let frame = reader.next_frame(&mut buffer).map_err(unreadable)?;
    // The chunks after the pixels, to the end, must read too.
    reader.finish().map_err(unreadable)?;
    buffer.truncate(frame.buffer_size());
    let channels = match frame.color_type {
        png::ColorType::Grayscale => Channels::Gray,
        png::ColorType::GrayscaleAlpha => Channels::GrayAlpha,
        png::ColorType::Rgb => Channels::Rgb,
        png::ColorType::Rgba => Channels::Rgba,
        png::ColorType::Indexed => return Err(unreadable("its palette is not expanded")),
    };
    if frame.bit_depth != png::BitDepth::Eight {
        return Err(unreadable("its depth is not 8 bits"));
    }
    Ok(Picture { kind: ImageKind::Png, width: frame.width, height: frame.height, channels, pixels: buffer })
}

fn decode_jpeg(bytes: &[u8], bounds: &Bounds) -> Result<Picture, ImageError> {
    use zune_jpeg::zune_core::bytestream::ZCursor;
    use zune_jpeg::zune_core::colorspace::ColorSpace;
    use zune_jpeg::zune_core::options::DecoderOptions;

    let side = usize::try_from(bounds.side).unwrap_or(usize::MAX);
    // Strict: a damaged stream is an error, not a picture filled in with grey.
    let options = DecoderOptions::new_safe().set_max_width(side).set_max_height(side).set_strict_mode(true);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(|e| match e {
        zune_jpeg::errors::DecodeErrors::Format(ref message) if message.contains("limit") => {
            bounds.too_many_pixels(format!("over {} pixels a side", bounds.side))
        }
        other => unreadable(other),
    })?;
    let info = decoder.info().ok_or_else(|| unreadable("its header is missing"))?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    bounds.check_size(width, height)?;
    let gray = decoder.input_colorspace() == Some(ColorSpace::Luma);
    let (out, channels) =
        if gray { (ColorSpace::Luma, Channels::Gray) } else { (ColorSpace::RGB, Channels::Rgb) };
    decoder.set_options(options.jpeg_set_out_colorspace(out));
    let pixels = u64::from(width) * u64::from(height);
    let components = u64::from(info.components.max(1));
    // A progressive image keeps every coefficient (16 bits each) until its last scan.
    let coefficients = if info.sof.is_progressive() { pixels * components * 2 } else { 0 };
    bounds.check_memory(pixels * channels.count() as u64 + coefficients)?;
    // The decoder takes a scan cut short as ended; the end-of-image marker after the last
    // scan (0xFF is never followed by 0xD9 inside one) says that nothing was cut.
    let last_scan = bytes.windows(2).rposition(|pair| pair == [0xFF, 0xDA]).unwrap_or(0);
    if !bytes[last_scan..].windows(2).any(|pair| pair == [0xFF, 0xD9]) {
        return Err(unreadable("it ends before its end-of-image marker"));
    }
    let decoded = decoder.decode().map_err(unreadable)?;
    Ok(Picture { kind: ImageKind::Jpeg, width, height, channels, pixels: decoded })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_known_by_their_signature() {
        assert_eq!(ImageKind::sniff(b"\x89PNG\r\n\x1a\n...."), Some(ImageKind::Png));
        assert_eq!(ImageKind::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(ImageKind::Jpeg));
        assert_eq!(ImageKind::sniff(b"GIF89a"), None);
        assert_eq!(decode(b"GIF89a", &UPLOADED), Err(ImageError::NotAnImage));
        assert!(matches!(decode(b"\x89PNG\r\n\x1a\nnot really", &UPLOADED), Err(ImageError::Unreadable(_))));
    }

    #[test]
    fn bounds_refuse_by_side_pixels_and_memory() {
        let bounds = Bounds { side: 100, pixels: 5_000, bytes: 1_000 };
        assert_eq!(bounds.check_size(100, 50), Ok(()));
        assert!(matches!(bounds.check_size(101, 1), Err(ImageError::TooManyPixels { .. })));
        assert!(matches!(bounds.check_size(100, 51), Err(ImageError::TooManyPixels { .. })));
        assert!(matches!(bounds.check_size(0, 10), Err(ImageError::Unreadable(_))));
        assert_eq!(bounds.check_memory(1_000), Ok(()));
        assert!(matches!(bounds.check_memory(1_001), Err(ImageError::TooMuchMemory { .. })));
    }
}
