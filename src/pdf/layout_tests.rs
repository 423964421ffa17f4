use super::*;

/// Every line of text laid out, page by page, with where it is and how wide.
fn texts(laid: &Laid) -> Vec<(usize, f32, f32, f32, &Line)> {
    let mut out = Vec::new();
    for (page, items) in laid.pages.iter().enumerate() {
        for item in items {
            if let Item::Text { x, y, size, line, .. } = item {
                out.push((page, *x, *y, line.width(*size), line));
            }
        }
    }
    out
}

fn sheet(blocks: Vec<Block>) -> Sheet {
    Sheet {
        title: "Medical certificate".into(),
        reference: Some("MC-1".into()),
        blocks,
        signing: Signing::Signed { signer: "Dr. Iris Tan".into(), at: "2026-01-06 10:42".into() },
        sign_here: None,
        footer: "Printed 2026-01-06 by Ana Cruz".into(),
    }
}

/// Names in every script the fonts are for, with their words in logical order.
pub(crate) const NAMES: [&str; 12] = [
    "Nguyễn Thị Peña",
    "Αλέξανδρος Παπαδόπουλος",
    "Иван Петрович Сидоров",
    "محمد عبد الله",
    "שרה כהן",
    "देवनागरी शर्मा",
    "สมชาย ใจดี",
    "王小明",
    "山田 さくら",
    "김민준",
    "Ana 😀 ☕",
    "Layla حسن Smith",
];

#[test]
fn no_glyph_drawn_is_a_fonts_notdef_in_any_script() {
    let fields = NAMES.iter().map(|n| ("Patient".to_owned(), (*n).to_owned())).collect();
    let laid = lay_out(
        &Letterhead { name: "Main".into(), ..Default::default() },
        &sheet(vec![Block::Fields(fields)]),
    );
    let lines = texts(&laid);
    for name in NAMES {
        let (_, _, _, _, line) = lines
            .iter()
            .find(|(.., line)| line.text == name)
            .unwrap_or_else(|| panic!("{name} not laid out"));
        for run in &line.runs {
            assert!(run.glyphs.iter().all(|g| g.id != 0), "{name}: .notdef in {run:?}");
            assert!(!run.glyphs.is_empty(), "{name}");
        }
        // Every character is shown by some glyph of the line.
        let shown: usize = line.runs.iter().map(|r| r.text.len()).sum();
        assert_eq!(shown, name.len(), "{name}");
    }
    // Joiners and variation selectors are hidden, not drawn as boxes.
    for text in ["👨\u{200D}👩\u{200D}👧", "☕\u{FE0F}", "a\u{200F}b", "क्\u{200D}ष"] {
        let line = text::line(text, false);
        assert!(line.runs.iter().flat_map(|r| &r.glyphs).all(|g| g.id != 0), "{text:?}: {line:?}");
    }
}

#[test]
fn right_to_left_runs_are_drawn_in_visual_order_and_shaped() {
    // Hebrew inside an English line: the Hebrew run comes reversed, between the English ones.
    let line = text::line("Dr. שרה כהן MD", false);
    let texts: Vec<&str> = line.runs.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(texts, ["Dr. ", "שרה כהן", " ", "MD"], "{line:?}");
    let hebrew = &line.runs[1];
    let first = hebrew.glyphs.first().unwrap().cluster;
    let last = hebrew.glyphs.last().unwrap().cluster;
    assert!(first > last, "the last letter is drawn first: {hebrew:?}");
    // Arabic letters join: shaped, the word takes other glyphs than its letters alone.
    let word = text::line("محمد", false);
    let alone: Vec<u32> =
        "محمد".chars().map(|c| text::line(&c.to_string(), false).runs[0].glyphs[0].id).collect();
    let joined: Vec<u32> = word.runs[0].glyphs.iter().rev().map(|g| g.id).collect();
    assert_ne!(joined, alone);
}

#[test]
fn text_wraps_at_spaces_between_ideographs_and_inside_words_too_long_for_a_line() {
    let lines = text::wrap("one two three four five six seven", 10.0, false, 60.0);
    assert!(lines.len() > 2, "{lines:?}");
    assert!(lines.iter().all(|l| l.width(10.0) <= 60.0), "{lines:?}");
    let words: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(words.join(" "), "one two three four five six seven");
    let cut = text::wrap(&"x".repeat(100), 10.0, false, 50.0);
    assert!(cut.len() > 1 && cut.iter().map(|l| l.text.as_str()).collect::<String>() == "x".repeat(100));
    assert!(cut.iter().all(|l| l.width(10.0) <= 50.0));
    let han = "王小明王小明王小明王小明王小明王小明";
    let lines = text::wrap(han, 10.0, false, 50.0);
    assert!(lines.len() > 1 && lines.iter().all(|l| l.width(10.0) <= 50.0), "{lines:?}");
    assert_eq!(lines.iter().map(|l| l.text.as_str()).collect::<String>(), han);
    let kept: Vec<String> = text::wrap("a\nb", 10.0, false, 100.0).into_iter().map(|l| l.text).collect();
    assert_eq!(kept, ["a", "b"]);
    // A Devanagari word is cut between its clusters, never inside a conjunct.
    let word = "क्षत्रिय".repeat(8);
    let lines = text::wrap(&word, 10.0, false, 40.0);
    assert!(lines.len() > 1 && lines.iter().all(|l| !l.text.starts_with('्')), "{lines:?}");
    assert_eq!(lines.iter().map(|l| l.text.as_str()).collect::<String>(), word);
}

#[test]
fn a_diagnosis_of_ten_thousand_characters_flows_onto_pages_whole() {
    let words: Vec<String> = (0..1111).map(|i| format!("w{i:04}x")).collect();
    let diagnosis = words.join(" ");
    assert!(diagnosis.len() > 7000);
    let table = Block::Table {
        columns: vec![("A".into(), 1.0), ("B".into(), 1.0)],
        rows: vec![vec![diagnosis.clone(), "short".into()]],
    };
    let blocks = vec![
        Block::Fields(vec![("Diagnosis".into(), diagnosis.clone())]),
        Block::Text(diagnosis.clone()),
        table,
    ];
    let mut long = sheet(blocks);
    long.title = diagnosis.chars().take(600).collect();
    let laid = lay_out(&Letterhead { name: "Main".into(), ..Default::default() }, &long);
    assert!(laid.pages.len() > 6, "{} pages", laid.pages.len());
    let lines = texts(&laid);
    let bottom = laid.footer[0].0 - FOOTER_GAP;
    for (page, x, y, width, line) in &lines {
        assert!(*y <= bottom + 0.01 && *y > MARGIN, "page {page}: {:?} at {y}", line.text);
        assert!(
            *x >= LEFT && x + width <= RIGHT + 0.01,
            "page {page}: {:?} from {x}, {width} wide",
            line.text
        );
    }
    let printed: Vec<&str> = lines.iter().flat_map(|(.., line)| line.text.split_whitespace()).collect();
    for word in &words {
        // Once in the field, in the paragraph and in the table; the title has the first.
        let times = printed.iter().filter(|w| *w == word).count();
        assert!(times >= 3, "{word} printed {times} times");
    }
}

#[test]
fn a_long_footer_wraps_beside_the_page_number_and_the_body_keeps_clear_of_it() {
    let mut long = sheet(vec![Block::Text("word ".repeat(3000))]);
    long.footer = "Printed 2026-01-06 10:45 (Asia/Manila) by ".to_owned() + &"Ana Cruz ".repeat(20);
    let laid = lay_out(&Letterhead::default(), &long);
    assert!(laid.footer.len() > 1, "{:?}", laid.footer.len());
    let number = text::line(WIDEST_PAGE_NUMBER, false).width(FOOTER_SIZE);
    assert!(laid.footer.iter().all(|(_, l)| LEFT + l.width(FOOTER_SIZE) < RIGHT - number));
    let top_of_footer = laid.footer[0].0 - FOOTER_SIZE;
    assert!(texts(&laid).iter().all(|(_, _, y, ..)| *y < top_of_footer - 10.0));
}

#[test]
fn the_place_to_sign_and_stamp_is_kept_on_one_page_clear_of_the_text_and_the_footer() {
    let place =
        SignHere { name: "Dr. Iris Tan".into(), details: vec!["Licence no. 0457731".into()], stamp: true };
    let letterhead = Letterhead { name: "Main".into(), ..Default::default() };
    // However much comes before it, the place and the line under it share a page.
    for words in [10, 400, 455, 470, 490, 520, 900] {
        let mut signed = sheet(vec![Block::Text("word ".repeat(words))]);
        signed.sign_here = Some(place.clone());
        let laid = lay_out(&letterhead, &signed);
        let last = laid.pages.last().unwrap();
        let frame = last.iter().find_map(|item| match item {
            Item::Frame { x, y, width, height } => Some((*x, *y, *width, *height)),
            _ => None,
        });
        let (fx, fy, fw, fh) =
            frame.unwrap_or_else(|| panic!("{words} words: no stamp box on the last page"));
        let signature_line = last.iter().find_map(|item| match item {
            Item::Line { x, y, width } => Some((*x, *y, *width)),
            _ => None,
        });
        let (lx, ly, lw) = signature_line.expect("a line to sign on");
        assert!(lx + lw < fx && fx + fw <= RIGHT + 0.01, "the line is beside the box");
        let bottom = laid.footer[0].0 - FOOTER_GAP;
        let on_last: Vec<_> =
            texts(&laid).into_iter().filter(|(page, ..)| *page == laid.pages.len() - 1).collect();
        let find = |text: &str| {
            on_last
                .iter()
                .find(|(.., line)| line.text == text)
                .unwrap_or_else(|| panic!("{words}: {text} not on the last page"))
        };
        let (_, nx, ny, nw, _) = find("Dr. Iris Tan");
        assert!(*ny > ly && *nx >= lx && nx + nw <= lx + lw, "the name is under the line");
        let (_, _, stamp_y, ..) = find("Clinic stamp");
        assert!(*stamp_y > fy + fh, "the stamp's label is under its box");
        let (_, _, signed_y, ..) = find("Signed in the system by Dr. Iris Tan on 2026-01-06 10:42");
        assert!(*signed_y > fy + fh && *signed_y > *stamp_y && *signed_y <= bottom + 0.01);
        // Nothing else of the page reaches into the place.
        for (_, x, y, width, line) in &on_last {
            let inside_box = *x < fx + fw && x + width > fx && *y > fy && *y - 10.0 < fy + fh;
            assert!(
                !inside_box || line.text == "Clinic stamp",
                "{words}: {:?} is in the stamp's box",
                line.text
            );
            let above_line = *y <= ly && *y > fy - 1.0 && *x < lx + lw && x + width > lx;
            assert!(!above_line, "{words}: {:?} is where the signature goes", line.text);
        }
    }
    // A draft has no place to sign.
    let mut draft = sheet(Vec::new());
    (draft.signing, draft.sign_here) = (Signing::Unsigned, Some(place));
    let laid = lay_out(&letterhead, &draft);
    assert!(laid.pages.iter().flatten().all(|item| !matches!(item, Item::Frame { .. } | Item::Line { .. })));
}
