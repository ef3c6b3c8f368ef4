fn main() {
    std::process::exit(rdmaperf::cli::main());
}
