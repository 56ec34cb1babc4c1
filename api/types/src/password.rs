//! The password rule of the guides (sign-up, users' own changes, the console's create-user
//! dialog), shared by the server and the console.

/// The rule as the console shows it.
pub const RULES: &str = "Password must be at least 8 characters long and contain at least one letter, one number and one special character.";

/// Whether `password` has 8 characters or more, with a letter, a digit and a special
/// character.
pub fn meets_rules(password: &str) -> bool {
    password.chars().count() >= 8
        && password.chars().any(char::is_alphabetic)
        && password.chars().any(|c| c.is_ascii_digit())
        && password
            .chars()
            .any(|c| !c.is_alphanumeric() && !c.is_whitespace())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_guides_rule() {
        assert!(super::meets_rules("Hired-pass-1"));
        for weak in [
            "short1!",
            "password1234",
            "password!!!!",
            "12345678!",
            "Pass word 1",
        ] {
            assert!(!super::meets_rules(weak), "{weak}");
        }
    }
}
