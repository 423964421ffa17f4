//! The fonts compiled in (under `assets/fonts/`, licences beside them) and which one prints a
//! character: the family of its script first, then every family in turn, so that a name in
//! any of the scripts names are written in finds its glyphs.
//! A character no font has prints as a visible `�`: no text is cut or dropped, and no glyph
//! drawn is a font's `.notdef` (`layout_tests`).

use std::sync::LazyLock;

use unicode_script::{Script, UnicodeScript};

/// A font file compiled in; `bold` when it is the bold face of its family.
pub(super) struct FontFile {
    pub data: &'static [u8],
    pub bold: bool,
}

macro_rules! font_file {
    ($file:literal, $bold:expr) => {
        FontFile { data: include_bytes!(concat!("../../assets/fonts/", $file)), bold: $bold }
    };
}

/// Every font, indexed by [`FontId`].
pub(super) static FONT_FILES: [FontFile; 12] = [
    font_file!("DejaVuSans.ttf", false),
    font_file!("DejaVuSans-Bold.ttf", true),
    font_file!("NotoSansArabic-Regular.ttf", false),
    font_file!("NotoSansArabic-Bold.ttf", true),
    font_file!("NotoSansHebrew-Regular.ttf", false),
    font_file!("NotoSansHebrew-Bold.ttf", true),
    font_file!("NotoSansDevanagari-Regular.ttf", false),
    font_file!("NotoSansDevanagari-Bold.ttf", true),
    font_file!("NotoSansThai-Regular.ttf", false),
    font_file!("NotoSansThai-Bold.ttf", true),
    font_file!("DroidSansFallback.ttf", false),
    font_file!("Symbola.ttf", false),
];

/// An index into [`FONT_FILES`].
pub(super) type FontId = usize;

/// A family: its regular face and its bold one, when it has one (a family without one is
/// printed bold by stroking the outlines of its regular face).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Sans,
    Arabic,
    Hebrew,
    Devanagari,
    Thai,
    /// Chinese, Japanese and Korean in one font.
    Cjk,
    /// Symbols and emoji, in outline (monochrome).
    Symbols,
}

/// The order in which families are tried for a character the family of its script lacks.
const FALLBACK: [Family; 7] = [
    Family::Sans,
    Family::Arabic,
    Family::Hebrew,
    Family::Devanagari,
    Family::Thai,
    Family::Cjk,
    Family::Symbols,
];

impl Family {
    fn of_script(script: Script) -> Self {
        match script {
            Script::Arabic => Self::Arabic,
            Script::Hebrew => Self::Hebrew,
            Script::Devanagari => Self::Devanagari,
            Script::Thai => Self::Thai,
            Script::Han | Script::Hiragana | Script::Katakana | Script::Hangul | Script::Bopomofo => {
                Self::Cjk
            }
            _ => Self::Sans,
        }
    }

    fn font(self, bold: bool) -> FontId {
        let (regular, bold_face) = match self {
            Self::Sans => (0, Some(1)),
            Self::Arabic => (2, Some(3)),
            Self::Hebrew => (4, Some(5)),
            Self::Devanagari => (6, Some(7)),
            Self::Thai => (8, Some(9)),
            Self::Cjk => (10, None),
            Self::Symbols => (11, None),
        };
        if bold { bold_face.unwrap_or(regular) } else { regular }
    }
}

/// The fonts parsed for shaping, indexed by [`FontId`].
pub(super) static FACES: LazyLock<Vec<rustybuzz::Face<'static>>> = LazyLock::new(|| {
    FONT_FILES
        .iter()
        .map(|file| rustybuzz::Face::from_slice(file.data, 0).expect("a font compiled in is readable"))
        .collect()
});

pub(super) fn face(font: FontId) -> &'static rustybuzz::Face<'static> {
    &FACES[font]
}

fn has(font: FontId, c: char) -> bool {
    face(font).glyph_index(c).is_some_and(|glyph| glyph.0 != 0)
}

/// Characters that only change how their neighbours are shown (joiners, variation
/// selectors, direction marks): they stay in their neighbour's font, which shaping hides
/// them in when it has no glyph for them.
pub(super) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// How a character is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Choice {
    pub font: FontId,
    /// No font has the character: a visible replacement mark is drawn in its place (the
    /// document's text still says the character).
    pub replaced: bool,
}

/// The font each character of `text` is printed in, one per character, in order. A
/// character common to scripts (a space, a digit, a mark, punctuation) stays in the font
/// of the one before it when that font has it, so that a run is shaped in one piece.
pub(super) fn choose(text: &str, bold: bool) -> Vec<Choice> {
    let mut previous: Option<FontId> = None;
    text.chars()
        .map(|c| {
            let choice = choose_one(c, bold, previous);
            previous = Some(choice.font);
            choice
        })
        .collect()
}

fn choose_one(c: char, bold: bool, previous: Option<FontId>) -> Choice {
    let found = |font| Choice { font, replaced: false };
    if let Some(previous) = previous {
        if is_invisible(c) {
            return found(previous);
        }
        let script = c.script();
        if matches!(script, Script::Common | Script::Inherited) && has(previous, c) {
            return found(previous);
        }
    }
    let preferred = Family::of_script(c.script());
    std::iter::once(preferred)
        .chain(FALLBACK)
        .map(|family| family.font(bold))
        .find(|font| has(*font, c))
        .map_or(Choice { font: Family::Sans.font(bold), replaced: true }, found)
}

/// Whether `font` is drawn bold by stroking its outlines, as `bold` text in a family
/// without a bold face.
pub(super) fn emboldened(font: FontId, bold: bool) -> bool {
    bold && !FONT_FILES[font].bold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_is_printed_in_a_font_that_has_it() {
        let cases = [
            ("Peña Ωμέγα Иванов", 0),
            ("محمد", 2),
            ("שרה", 4),
            ("देवनागरी", 6),
            ("สมชาย", 8),
            ("王小明 さくら 김민준", 10),
            ("🦄", 11),
        ];
        for (text, font) in cases {
            let choices = choose(text, false);
            assert!(choices.iter().all(|c| !c.replaced), "{text}: {choices:?}");
            let letters = text.chars().zip(&choices).filter(|(c, _)| !c.is_whitespace());
            assert!(letters.clone().all(|(_, choice)| choice.font == font), "{text}: {choices:?}");
        }
        assert_eq!(choose("محمد", true)[0].font, 3);
        assert!(emboldened(10, true) && !emboldened(3, true) && !emboldened(10, false));
    }

    #[test]
    fn a_character_no_font_has_is_replaced_visibly() {
        // A private-use character: no font draws it.
        let choices = choose("a\u{E000}b", false);
        assert_eq!(choices.iter().map(|c| c.replaced).collect::<Vec<_>>(), [false, true, false]);
    }
}
