fn main() -> std::process::ExitCode {
    clinic_server::cli::main()
}
