//! Printed documents: what a page says ([`Sheet`]: a title, fields, paragraphs, tables and a
//! signature) under a branch's [`Letterhead`], laid out on A4 pages and written as PDF.
//!
//! Text is shaped here (`text`), in fonts compiled in for every script names are written in
//! (`fonts`, from `assets/fonts/` with their licences), and flows onto as many pages as it
//! needs: nothing is cut. krilla writes the PDF: it embeds the fonts as subsets and maps every
//! glyph back to its characters, so that the text can be copied and extracted. A document
//! that should be signed and is not carries a DRAFT mark across every page and in place of
//! the signature; a signed one says who signed it in the system and when, under the place
//! where its printed copy is signed by hand and stamped, when it declares one.

mod draw;
mod fonts;
mod layout;
mod sheet;
mod text;

pub use sheet::{Block, Letterhead, Logo, PdfError, Sheet, SignHere, Signing};

/// The document as PDF bytes. Takes a few milliseconds of CPU: call it off the async threads.
pub fn render(letterhead: &Letterhead, sheet: &Sheet) -> Result<Vec<u8>, PdfError> {
    let laid = layout::lay_out(letterhead, sheet);
    draw::write(&laid, letterhead, sheet)
}

/// How many pages `sheet` takes.
pub fn page_count(letterhead: &Letterhead, sheet: &Sheet) -> usize {
    layout::lay_out(letterhead, sheet).pages.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_document_is_written_on_several_pages() {
        let rows = (0..200).map(|i| vec![format!("row {i}"), "Nguyễn Thị Peña".to_owned()]).collect();
        let sheet = Sheet {
            title: "Report".into(),
            reference: Some("R-1".into()),
            blocks: vec![Block::Table { columns: vec![("A".into(), 1.0), ("B".into(), 2.0)], rows }],
            signing: Signing::NotSigned,
            sign_here: None,
            footer: "printed".into(),
        };
        let pages = layout::lay_out(&Letterhead { name: "Main".into(), ..Default::default() }, &sheet).pages;
        assert!(pages.len() > 3, "{} pages", pages.len());
        let pdf = render(&Letterhead::default(), &sheet).unwrap();
        assert!(pdf.starts_with(b"%PDF-"));
    }
}
