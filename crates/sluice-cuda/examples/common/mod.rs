//! Command-line helpers shared by the examples (`#[path]`-included; not an example itself).

/// Removes `name VALUE` from `args` and returns VALUE, or `default` when absent.
pub fn take_number(args: &mut Vec<String>, name: &str, default: f64) -> f64 {
    match args.iter().position(|a| a == name) {
        Some(i) => {
            let v = args[i + 1].parse().expect("number");
            args.drain(i..i + 2);
            v
        }
        None => default,
    }
}

/// Removes the flag `name` from `args`; whether it was there.
pub fn take_flag(args: &mut Vec<String>, name: &str) -> bool {
    match args.iter().position(|a| a == name) {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    }
}
