fn main() {
    let argv = match rdmaperf::cli::names::command_line(std::env::args().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // `fabric` has its own flags in front of a tool's (rdmaperf::fabric::cli);
    // dispatched here so that `cli` and `fabric` do not import each other.
    if argv.get(1).map(String::as_str) == Some("fabric") {
        std::process::exit(rdmaperf::fabric::cli::main(&argv[2..]));
    }
    std::process::exit(rdmaperf::cli::main(argv));
}
