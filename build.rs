//! Puts the git commit into `--version` when the source is a git checkout; otherwise the plain
//! package version. Never fails the build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    if commit.is_some() {
        // Rebuild when HEAD moves: HEAD itself, the branch it points to, and packed refs.
        let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
        watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
        for name in watch {
            if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
                if std::path::Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
    }
    match commit {
        Some(c) => println!("cargo:rustc-env=VLOER_VERSION={version} (git {c})"),
        None => println!("cargo:rustc-env=VLOER_VERSION={version}"),
    }
}
