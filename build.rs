// Migrations are embedded at compile time: a new or changed SQL file must rebuild the crate.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=tenants");
}
