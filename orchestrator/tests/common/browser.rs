//! A real headless Chromium driven over WebDriver: `chromedriver` started on
//! a free port by the test, `fantoccini` as the client, screenshots written
//! under `target/console-screenshots/`.

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use limited_process::ProcessGroupGuard;
use serde_json::json;

/// How long chromedriver and page elements may take to appear (a wait that
/// ends as soon as they do, not a timing assertion).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A running `chromedriver`, killed when dropped with every Chromium it
/// started: it leads its own process group, so a test that fails before
/// closing its session leaves no browser behind.
pub struct ChromeDriver {
    child: Child,
    group: Option<ProcessGroupGuard>,
    port: u16,
}

impl ChromeDriver {
    /// Starts `chromedriver` on a free port once it accepts connections;
    /// `None` (said loudly) when chromium or chromedriver is missing, a
    /// failure under `REQUIRE_SERVICES=1` (CI).
    pub fn start() -> Option<Self> {
        let installed = |name: &str| Command::new(name).arg("--version").stdout(Stdio::null()).status().is_ok();
        if !installed("chromedriver") || !installed("chromium") {
            let message = "chromium and chromedriver are needed (apt-get install -y chromium chromium-driver)";
            assert!(!test_support::services_required(), "{message}");
            eprintln!("\n!!! SKIPPED: {message} !!!\n");
            return None;
        }
        let port = super::free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let group = Some(ProcessGroupGuard::new(Some(child.id())));
        let deadline = Instant::now() + PATIENCE;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver never listened on port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Self { child, group, port })
    }

    /// A new headless Chromium session.
    pub async fn session(&self) -> Client {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1100"]}),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a chromium session")
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        // The guard kills the group and the tree below chromedriver (the
        // browsers) first, while chromedriver's pid is still its own.
        drop(self.group.take());
        let _ = self.child.wait();
    }
}

/// Waits for the element at `css`.
pub async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    client.wait().at_most(PATIENCE).for_element(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}"))
}

/// Writes a screenshot of the page as `target/console-screenshots/{name}.png`.
pub async fn screenshot(client: &Client, name: &str) -> PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let target = test_binary.ancestors().nth(3).expect("target/debug/deps/<test>").to_owned();
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, client.screenshot().await.unwrap()).unwrap();
    path
}
