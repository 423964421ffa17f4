//! What a file is, by its first bytes and never by what it is called: the kinds a chart
//! keeps, the media types each may be declared as, and the name a file is sent under.

use crate::http::error::ApiError;
use crate::images::ImageKind;
use salvo::http::StatusCode;

/// The bytes [`Kind::sniff`] needs: a DICOM file's 128-byte preamble and its `DICM`.
pub const HEAD_BYTES: usize = 132;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pdf,
    Jpeg,
    Png,
    Tiff,
    Dicom,
}

impl Kind {
    /// The kind `head` (the file's first bytes, up to [`HEAD_BYTES`]) begins as, if any.
    pub fn sniff(head: &[u8]) -> Option<Self> {
        // Images by the signatures the decoder of uploaded images reads them by.
        if let Some(image) = ImageKind::sniff(head) {
            Some(match image {
                ImageKind::Png => Self::Png,
                ImageKind::Jpeg => Self::Jpeg,
            })
        } else if head.starts_with(b"%PDF-") {
            Some(Self::Pdf)
        } else if head.starts_with(b"II*\0") || head.starts_with(b"MM\0*") {
            Some(Self::Tiff)
        } else if head.len() >= HEAD_BYTES && &head[128..132] == b"DICM" {
            Some(Self::Dicom)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Pdf => "pdf",
            Self::Jpeg => "jpeg",
            Self::Png => "png",
            Self::Tiff => "tiff",
            Self::Dicom => "dicom",
        }
    }

    pub fn of_name(name: &str) -> Option<Self> {
        [Self::Pdf, Self::Jpeg, Self::Png, Self::Tiff, Self::Dicom].into_iter().find(|k| k.name() == name)
    }

    /// The media type the file is kept and answered as.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Pdf => "application/pdf",
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
            Self::Tiff => "image/tiff",
            Self::Dicom => "application/dicom",
        }
    }

    /// Whether a thumbnail can be drawn of it.
    pub fn is_image(self) -> bool {
        matches!(self, Self::Jpeg | Self::Png | Self::Tiff)
    }

    fn described(self) -> &'static str {
        match self {
            Self::Pdf => "a PDF document",
            Self::Jpeg => "a JPEG image",
            Self::Png => "a PNG image",
            Self::Tiff => "a TIFF image",
            Self::Dicom => "a DICOM file",
        }
    }

    /// Media types a file of this kind may be declared as, beside its own.
    fn also_declared_as(self) -> &'static [&'static str] {
        match self {
            Self::Jpeg => &["image/jpg", "image/pjpeg"],
            Self::Tiff => &["image/tiff-fx"],
            Self::Pdf => &["application/x-pdf"],
            Self::Png | Self::Dicom => &[],
        }
    }
}

/// 415 `unsupported_media` with `message`.
pub fn unsupported(message: impl Into<String>) -> ApiError {
    ApiError::Refusal {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        code: "unsupported_media",
        message: message.into(),
    }
}

/// The kind of a file whose first bytes are `head`, sent as `declared` (its Content-Type's
/// essence, if any): judged by the bytes alone, and refused when the declared type names
/// something else. `application/octet-stream` (or nothing) declares nothing.
pub fn judge(head: &[u8], declared: Option<&str>) -> Result<Kind, ApiError> {
    let kind = Kind::sniff(head).ok_or_else(|| {
        unsupported("The file is not a PDF, JPEG, PNG, TIFF or DICOM file (judged by its content).")
    })?;
    match declared.map(str::to_ascii_lowercase) {
        None => Ok(kind),
        Some(declared)
            if declared.is_empty()
                || declared == "application/octet-stream"
                || declared == kind.media_type()
                || kind.also_declared_as().contains(&declared.as_str()) =>
        {
            Ok(kind)
        }
        Some(declared) => Err(unsupported(format!(
            "The file is {} ({}), not {declared} as its Content-Type says.",
            kind.described(),
            kind.media_type()
        ))),
    }
}

/// The essence of a Content-Type value: `image/png` of `image/png; q=1`.
pub fn essence(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// The longest name kept, in characters.
pub const MAX_FILENAME: usize = 255;

/// The file's name from a `Content-Disposition` value: RFC 6266's `filename*=UTF-8''...`
/// (percent-encoded) before the plain `filename="..."`. Only the last path segment is kept,
/// without control characters, at most [`MAX_FILENAME`] characters.
pub fn filename_of(disposition: &str) -> Option<String> {
    let mut plain = None;
    let mut extended = None;
    for param in split_params(disposition).into_iter().skip(1) {
        let Some((name, value)) = param.split_once('=') else { continue };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "filename*" {
            let Some((charset, rest)) = value.split_once('\'') else { continue };
            let Some((_, encoded)) = rest.split_once('\'') else { continue };
            if charset.eq_ignore_ascii_case("utf-8") {
                extended =
                    percent_encoding::percent_decode_str(encoded).decode_utf8().ok().map(|s| s.into_owned());
            }
        } else if name == "filename" {
            plain = Some(unquote(value));
        }
    }
    extended.or(plain).map(|name| clean_filename(&name)).filter(|name| !name.is_empty())
}

/// A name as kept: its last path segment, no control characters, bounded.
pub fn clean_filename(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    last.chars().filter(|c| !c.is_control()).take(MAX_FILENAME).collect::<String>().trim().to_owned()
}

/// The parameters of a header value, split on `;` outside quotes.
fn split_params(value: &str) -> Vec<String> {
    let (mut parts, mut current, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in value.chars() {
        match c {
            _ if escaped => {
                escaped = false;
                current.push(c);
            }
            '\\' if quoted => {
                escaped = true;
                current.push(c);
            }
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            ';' if !quoted => parts.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    parts.push(current);
    parts
}

fn unquote(value: &str) -> String {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut escaped = false;
            for c in inner.chars() {
                if escaped || c != '\\' {
                    out.push(c);
                    escaped = false;
                } else {
                    escaped = true;
                }
            }
            out
        }
        None => value.to_owned(),
    }
}

/// A `Content-Disposition: attachment` value naming `filename`: an ASCII fallback quoted,
/// and the name itself as RFC 6266's `filename*`.
pub fn disposition(filename: &str) -> String {
    const ENCODED: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    let fallback: String = filename
        .chars()
        .map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '_' })
        .collect();
    let encoded = percent_encoding::utf8_percent_encode(filename, ENCODED);
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_known_by_their_first_bytes() {
        assert_eq!(Kind::sniff(b"%PDF-1.7\n"), Some(Kind::Pdf));
        assert_eq!(Kind::sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some(Kind::Jpeg));
        assert_eq!(Kind::sniff(b"\x89PNG\r\n\x1a\n\0\0"), Some(Kind::Png));
        assert_eq!(Kind::sniff(b"II*\0\x08\0"), Some(Kind::Tiff));
        assert_eq!(Kind::sniff(b"MM\0*\0\0"), Some(Kind::Tiff));
        let mut dicom = vec![0u8; 128];
        dicom.extend_from_slice(b"DICM\x02\0");
        assert_eq!(Kind::sniff(&dicom), Some(Kind::Dicom));
        assert_eq!(Kind::sniff(b"GIF89a"), None);
        assert_eq!(Kind::sniff(&[0u8; 132]), None);
    }

    #[test]
    fn a_declared_type_naming_another_kind_is_refused() {
        let png = b"\x89PNG\r\n\x1a\n";
        assert_eq!(judge(png, Some("image/png")).ok(), Some(Kind::Png));
        assert_eq!(judge(png, Some("application/octet-stream")).ok(), Some(Kind::Png));
        assert_eq!(judge(png, None).ok(), Some(Kind::Png));
        let refused = judge(png, Some("application/pdf")).unwrap_err();
        assert!(refused.to_string().contains("PNG"), "{refused}");
        assert!(judge(b"hello", None).is_err());
    }

    #[test]
    fn names_come_from_either_form_of_the_disposition() {
        assert_eq!(filename_of("attachment; filename=\"scan.pdf\"").as_deref(), Some("scan.pdf"));
        assert_eq!(filename_of("attachment; filename=plain.png").as_deref(), Some("plain.png"));
        assert_eq!(
            filename_of("attachment; filename=\"x.pdf\"; filename*=UTF-8''%C3%A9t%C3%A9%20scan.pdf")
                .as_deref(),
            Some("été scan.pdf")
        );
        assert_eq!(filename_of("attachment; filename=\"../../etc/a;b.pdf\"").as_deref(), Some("a;b.pdf"));
        assert_eq!(filename_of("attachment"), None);
        assert_eq!(
            disposition("été \"1\".pdf"),
            "attachment; filename=\"_t_ _1_.pdf\"; filename*=UTF-8''%C3%A9t%C3%A9%20%221%22.pdf"
        );
    }
}
