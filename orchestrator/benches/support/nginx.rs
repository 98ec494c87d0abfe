//! nginx as a plain reverse proxy in front of one module, for comparison:
//! started as a non-daemon child with a generated configuration in a
//! temporary directory, on a free port, stopped (worker and all) when dropped.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian installs nginx (`apt-get install -y nginx`).
const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx proxying every request to one upstream.
pub struct Nginx {
    child: Child,
    _directory: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Nginx {
    /// The master process's id (its one worker is its child).
    pub fn master_pid(&self) -> u32 {
        self.child.id()
    }

    /// nginx (one worker, keep-alive to the upstream, no access log)
    /// proxying to `upstream` (`127.0.0.1:PORT`), listening on `port`;
    /// `None` when nginx is not installed.
    pub fn start(upstream: &str, port: u16) -> Option<Self> {
        let binary = which_nginx()?;
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path().display().to_string();
        let config = format!(
            "worker_processes 1;\ndaemon off;\npid {root}/nginx.pid;\nerror_log {root}/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {root}/body;\n  proxy_temp_path {root}/proxy;\n\
               fastcgi_temp_path {root}/fastcgi;\n  uwsgi_temp_path {root}/uwsgi;\n  scgi_temp_path {root}/scgi;\n\
               upstream module {{ server {upstream}; keepalive 64; }}\n\
               server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://module;\n\
                   proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n"
        );
        let path = directory.path().join("nginx.conf");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(directory.path())
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("nginx starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nginx did not listen on {port}; see its error log in {root}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Self { child, _directory: directory, url: format!("http://127.0.0.1:{port}") })
    }
}

/// nginx's path: `/usr/sbin/nginx`, or whatever `PATH` finds.
fn which_nginx() -> Option<std::path::PathBuf> {
    let installed = std::path::Path::new(NGINX);
    if installed.exists() {
        return Some(installed.to_path_buf());
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| std::path::Path::new(dir).join("nginx"))
        .find(|p| p.exists())
}

impl Drop for Nginx {
    /// Stops nginx with SIGTERM, on which the master stops its worker and
    /// exits (SIGKILL would leave the worker running, still listening);
    /// SIGKILL only if it has not exited within 5 s.
    fn drop(&mut self) {
        if let Some(pid) = i32::try_from(self.child.id()).ok().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
