fn main() {
    let argv: Vec<String> = std::env::args().collect();
    // `fabric` has its own flags in front of a tool's (rdmaperf::fabric::cli);
    // dispatched here so that `cli` and `fabric` do not import each other.
    if argv.get(1).map(String::as_str) == Some("fabric") {
        std::process::exit(rdmaperf::fabric::cli::main(&argv[2..]));
    }
    std::process::exit(rdmaperf::cli::main());
}
