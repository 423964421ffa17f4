//! How long a printed page takes to lay out and write: each kind of document the server
//! prints, with a letterhead and a logo, many times over; then a long access log, per page.
//!
//!   cargo bench --bench documents
//!
//! A page must be made in well under 50 ms. The database reads around a print (the record,
//! the names in it, the letterhead) are point reads of a few rows and come on top.

use std::time::{Duration, Instant};

use clinic_server::pdf::{Block, Letterhead, Logo, Sheet, SignHere, Signing, page_count, render};

/// A 96 x 96 PNG (a grey square), as a small logo.
fn logo() -> Logo {
    // Built with the same encoder the tests use would need flate2 here; a stored (level 0)
    // deflate block keeps this self-contained.
    let size: u32 = 96;
    let mut raw = Vec::new();
    for _ in 0..size {
        raw.push(0);
        raw.extend(std::iter::repeat_n(128u8, (size * 3) as usize));
    }
    let mut zlib = vec![0x78, 0x01];
    for (i, chunk) in raw.chunks(65_535).enumerate() {
        let last = (i + 1) * 65_535 >= raw.len();
        zlib.push(last as u8);
        zlib.extend((chunk.len() as u16).to_le_bytes());
        zlib.extend((!(chunk.len() as u16)).to_le_bytes());
        zlib.extend(chunk);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for byte in &raw {
        a = (a + *byte as u32) % 65_521;
        b = (b + a) % 65_521;
    }
    zlib.extend(((b << 16) | a).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8], body: &[u8]| {
        png.extend((body.len() as u32).to_be_bytes());
        png.extend(kind);
        png.extend(body);
        png.extend(crc32(kind, body).to_be_bytes());
    };
    let mut header = Vec::new();
    header.extend(size.to_be_bytes());
    header.extend(size.to_be_bytes());
    header.extend([8, 2, 0, 0, 0]);
    chunk(b"IHDR", &header);
    chunk(b"IDAT", &zlib);
    chunk(b"IEND", &[]);
    Logo::read(png).expect("a PNG")
}

fn crc32(kind: &[u8], body: &[u8]) -> u32 {
    let mut crc = !0u32;
    for byte in kind.iter().chain(body) {
        crc ^= *byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

fn fields(pairs: &[(&str, &str)]) -> Block {
    Block::Fields(pairs.iter().map(|(l, v)| ((*l).to_owned(), (*v).to_owned())).collect())
}

fn patient() -> Block {
    fields(&[
        ("Patient", "Nguyễn Thị Peña"),
        ("PIN", "MAIN-000042"),
        ("Birth date", "1984-07-09"),
        ("Sex", "Female"),
    ])
}

fn signed() -> Signing {
    Signing::Signed { signer: "Dr. Iris Tan".into(), at: "2026-01-06 10:42 (Asia/Manila)".into() }
}

fn sheet(title: &str, blocks: Vec<Block>, signing: Signing) -> Sheet {
    // A signed document ends where its doctor signs it by hand, beside the clinic's stamp.
    let sign_here = matches!(signing, Signing::Signed { .. }).then(|| SignHere {
        name: "Dr. Iris Tan".into(),
        details: vec!["Licence no. PRC-0457731".into()],
        stamp: true,
    });
    Sheet {
        title: title.into(),
        reference: Some("MC-MAIN-000001".into()),
        blocks,
        signing,
        sign_here,
        footer: "Printed 2026-01-06 10:45 (Asia/Manila) by Ana Cruz".into(),
    }
}

fn access_log(rows: usize) -> Sheet {
    let rows = (0..rows)
        .map(|i| {
            vec![
                format!("2026-01-{:02} 10:{:02} (Asia/Manila)", i % 28 + 1, i % 60),
                "Dr. Iris Tan".into(),
                ["view", "list", "search", "print"][i % 4].into(),
                format!("patients {i}"),
                "GET /api/v1/medical-certificates/{id}".into(),
            ]
        })
        .collect();
    let columns = [("When", 1.35), ("Who", 1.2), ("Action", 0.8), ("Record", 1.5), ("Route", 2.2)];
    let table = Block::Table { columns: columns.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect(), rows };
    sheet("Access log", vec![patient(), table], Signing::NotSigned)
}

fn documents() -> Vec<(&'static str, Sheet)> {
    let certificate = sheet(
        "Medical certificate",
        vec![
            patient(),
            Block::Text(
                "This is to certify that Nguyễn Thị Peña was seen at Main Branch on 2026-01-05.".into(),
            ),
            fields(&[
                ("Issued on", "2026-01-06"),
                ("Doctor", "Iris Tan (licence no. PRC-0457731)"),
                ("Diagnosis", "Acute conjunctivitis, both eyes"),
                ("Rest", "3 days"),
            ]),
        ],
        signed(),
    );
    let eye = |name: &str| {
        vec![
            name.into(),
            "-1.25".into(),
            "-0.50".into(),
            "90°".into(),
            "+1.50".into(),
            "".into(),
            "".into(),
            "6/6".into(),
        ]
    };
    let columns = ["Eye", "Sphere", "Cylinder", "Axis", "Add", "Prism", "Base", "VA"];
    let prescription = sheet(
        "Spectacle prescription",
        vec![
            patient(),
            Block::Table {
                columns: columns.iter().map(|c| ((*c).to_owned(), 1.0)).collect(),
                rows: vec![eye("Right (OD)"), eye("Left (OS)")],
            },
        ],
        Signing::Unsigned,
    );
    let receipt = sheet(
        "Receipt",
        vec![
            patient(),
            fields(&[
                ("Amount received", "1250.50"),
                ("Payment method", "Card"),
                ("Reference", "AUTH-99812"),
            ]),
        ],
        signed(),
    );
    let mut summary = vec![
        patient(),
        Block::Heading("Visit".into()),
        fields(&[("Date", "2026-01-05"), ("Status", "completed")]),
    ];
    for kind in ["Complaint", "Refraction", "Tonometry", "Slit lamp", "Funduscopy", "Visual acuity"] {
        summary.push(Block::Heading(format!("{kind} (2)")));
        for _ in 0..2 {
            summary.push(fields(&[
                ("Examined at", "2026-01-05 09:10 (Asia/Manila)"),
                ("Examiner", "Dr. Iris Tan"),
                ("Right eye", "sphere -1.25, cylinder -0.50, axis 90"),
                ("Left eye", "not assessed"),
                ("Signed", "Dr. Iris Tan, 2026-01-05 09:30 (Asia/Manila)"),
            ]));
        }
    }
    vec![
        ("certificate", certificate),
        ("prescription", prescription),
        ("receipt", receipt),
        ("visit summary", sheet("Visit summary", summary, signed())),
        ("access log, 30 rows", access_log(30)),
    ]
}

fn main() {
    let letterhead = Letterhead {
        name: "Main Branch".into(),
        address: Some("12 Rizal Avenue, Quezon City".into()),
        phone: Some("+63 2 8123 4567".into()),
        logo: Some(logo()),
    };
    // The first document parses the fonts once for the process.
    render(&letterhead, &documents()[0].1).unwrap();
    println!(
        "{:<24} {:>6} {:>10} {:>10} {:>10} {:>9}",
        "document", "pages", "mean ms", "p95 ms", "max ms", "bytes"
    );
    let runs = 60;
    for (name, sheet) in documents().into_iter().chain([("access log, 400 rows", access_log(400))]) {
        let mut times: Vec<Duration> = Vec::with_capacity(runs);
        let mut size = 0;
        for _ in 0..runs {
            let start = Instant::now();
            let pdf = render(&letterhead, &sheet).unwrap();
            times.push(start.elapsed());
            size = pdf.len();
        }
        let pages = page_count(&letterhead, &sheet);
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mean = times.iter().map(|d| ms(*d)).sum::<f64>() / runs as f64;
        println!(
            "{name:<24} {pages:>6} {mean:>10.2} {:>10.2} {:>10.2} {size:>9}",
            ms(times[runs * 95 / 100]),
            ms(times[runs - 1])
        );
    }
}
