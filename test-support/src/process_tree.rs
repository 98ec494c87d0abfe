//! The processes below a process, as `/proc` shows them now (each task's
//! `children` file), for tests that check what a process left behind.

/// Every process below `pid`: its children, theirs, and so on.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|id| id.parse().ok()) {
                found.push(child);
                parents.push(child);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grandchild_is_found() {
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().expect("sh runs");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = Vec::new();
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            found = descendants(child.id());
        }
        let _ = child.kill();
        for pid in &found {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        let _ = child.wait();
        assert_eq!(found.len(), 1, "sh's one child, the sleep: {found:?}");
    }
}
