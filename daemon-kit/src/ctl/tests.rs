use super::*;
use std::io::{BufRead, BufReader, Read, Write};

#[derive(Debug, PartialEq)]
enum Cmd {
    Stats,
}

fn parse(words: &[&str]) -> Result<Cmd, String> {
    match words {
        ["stats"] => Ok(Cmd::Stats),
        _ => Err(format!("unknown command {:?}", words.join(" "))),
    }
}

/// A dataplane stand-in: answers every request until dropped.
struct Answerer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
}

impl Answerer {
    fn start(rx: Receiver<Request<Cmd>>) -> Answerer {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut n = 0u64;
            while !s.load(Ordering::Relaxed) {
                answer_pending(&rx, |c| {
                    n += 1;
                    assert_eq!(c, Cmd::Stats);
                    Ok(json!({"ports": [], "n": n}))
                });
                std::thread::sleep(Duration::from_millis(1));
            }
            n
        });
        Answerer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Answerer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn socket_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dk-ctl-")
        .tempdir()
        .expect("temp dir")
}

fn serve_at(path: &Path, limits: Limits) -> (CtlServer, Answerer) {
    let (tx, rx) = channel();
    let server = CtlServer::start_with(path, tx, parse, limits).unwrap();
    (server, Answerer::start(rx))
}

fn stats(path: &Path) -> Result<Value, ClientError> {
    client(path, &["stats".to_string()])
}

#[test]
fn round_trip_over_a_socket() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let (server, _dp) = serve_at(&path, Limits::default());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(stats(&path).unwrap()["ports"], json!([]));
    let err = client(&path, &["bogus".to_string()]).unwrap_err();
    assert!(err.to_string().contains("unknown command"), "{err}");
    assert_eq!(
        err.exit_code(),
        2,
        "a refused command is an invalid configuration"
    );
    // Several commands on one connection are answered in order.
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(b"stats\n\nbogus\nstats").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let lines: Vec<Value> = BufReader::new(&s)
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["ok"], true);
    assert_eq!(lines[1]["ok"], false);
    assert_eq!(lines[2]["ok"], true);
    // A second server on a live socket is refused.
    let (tx2, _rx2) = channel::<Cmd>();
    let e = CtlServer::start(&path, tx2, parse).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AddrInUse);
    drop(server);
    assert!(!path.exists());
    let e = stats(&path).unwrap_err();
    assert_eq!(e.exit_code(), 1, "{e}");
}

#[test]
fn replaces_a_stale_socket_file() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let (tx, _rx) = channel::<Cmd>();
    let server = CtlServer::start(&path, tx, parse).unwrap();
    drop(server);
    assert!(!path.exists());
}

#[test]
fn refuses_to_replace_what_is_not_a_socket() {
    let dir = socket_dir();
    // A regular file with data in it: untouched.
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"keep me").unwrap();
    let (tx, _rx) = channel::<Cmd>();
    let e = CtlServer::start(&file, tx.clone(), parse).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A directory, and a symbolic link to a stale socket.
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(
        CtlServer::start(&sub, tx.clone(), parse)
            .unwrap_err()
            .kind(),
        ErrorKind::AlreadyExists
    );
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&stale, &link).unwrap();
    assert_eq!(
        CtlServer::start(&link, tx, parse).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert!(stale.exists());
}

#[test]
fn an_overlong_line_is_refused_without_being_buffered() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let (_server, _dp) = serve_at(&path, Limits::default());
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    // 64 MB without a newline: the listener stops reading after 4097 octets, answers and
    // closes, so the writer fails long before the end (it would block forever, or the
    // listener would hold 64 MB, otherwise).
    let chunk = vec![b'x'; 1 << 16];
    let mut written = 0usize;
    let mut failed = false;
    for _ in 0..1024 {
        match s.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "all {written} octets were taken");
    assert!(
        written < 32 << 20,
        "{written} octets taken before the refusal"
    );
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    // The answer may be lost when the peer resets; when it arrives it names the limit.
    if !answer.is_empty() {
        assert!(answer.contains("longer than 4096"), "{answer}");
    }
    // The socket still serves others.
    assert!(stats(&path).is_ok());
}

#[test]
fn an_overlong_line_gets_an_answer() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let (_server, _dp) = serve_at(&path, Limits::default());
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(&[b'y'; 5000]).unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["error"].as_str().unwrap().contains("longer than 4096"));
}

#[test]
fn a_drip_fed_or_idle_client_stalls_nobody() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let (_server, _dp) = serve_at(&path, Limits::default());
    let mut drip = UnixStream::connect(&path).unwrap();
    drip.write_all(b"st").unwrap();
    let idle: Vec<UnixStream> = (0..10)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    for _ in 0..5 {
        drip.write_all(b"a").unwrap();
        assert!(stats(&path).is_ok());
    }
    drip.write_all(b"ts\n").unwrap();
    let mut line = String::new();
    BufReader::new(&drip).read_line(&mut line).unwrap();
    assert!(line.contains("\"ok\":false"), "{line}");
    drop(idle);
}

#[test]
fn a_client_that_never_finishes_its_line_is_cut_off() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let limits = Limits {
        line_deadline: Duration::from_millis(100),
        ..Limits::default()
    };
    let (_server, _dp) = serve_at(&path, limits);
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"sta").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("timed out"), "{answer}");
}

#[test]
fn connections_beyond_the_limit_are_refused_then_served_again() {
    let dir = socket_dir();
    let path = dir.path().join("ctl.sock");
    let limits = Limits {
        max_connections: 3,
        ..Limits::default()
    };
    let (_server, _dp) = serve_at(&path, limits);
    let held: Vec<UnixStream> = (0..3)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    // Every held connection is accepted before the next: each answers a command.
    for mut h in &held {
        h.write_all(b"stats\n").unwrap();
        let mut line = String::new();
        BufReader::new(h).read_line(&mut line).unwrap();
        assert!(line.contains("\"ok\":true"), "{line}");
    }
    let e = stats(&path).unwrap_err();
    assert!(
        e.to_string().contains("too many control connections"),
        "{e}"
    );
    drop(held);
    // Closed connections free their places (the listener notices at its next step).
    let mut ok = false;
    for _ in 0..1000 {
        if stats(&path).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(ok);
}

#[test]
fn tables_align() {
    let t = print_table(
        &json!([{"name":"p1","rx":1},{"name":"port2","rx":12345}]),
        &[],
    );
    assert_eq!(t, "name   rx\np1     1\nport2  12345\n");
    let t = print_table(&json!([{"dst":"x","flow":0,"z":null}]), &["flow", "dst"]);
    assert_eq!(t, "flow  dst  z\n0     x    -\n");
    assert_eq!(print_table(&json!([]), &[]), "(none)\n");
}

#[test]
fn set_operands_become_pairs_and_toml_values() {
    assert_eq!(
        parse_pairs(&["qeq", "20KB"]).unwrap(),
        vec![("qeq".to_string(), "20KB".to_string())]
    );
    assert_eq!(parse_pairs(&["a=1", "mode=fqcn"]).unwrap().len(), 2);
    assert!(parse_pairs(&[]).is_err());
    assert!(parse_pairs(&["a=1", "b"]).is_err());
    assert!(parse_pairs(&["=1"]).is_err());
    assert!(parse_pairs(&["a", "b", "c"]).is_err());
    assert_eq!(toml_value("4"), toml::Value::Integer(4));
    assert_eq!(toml_value("1.5"), toml::Value::Float(1.5));
    assert_eq!(toml_value("20KB"), toml::Value::String("20KB".into()));
    assert_eq!(
        toml_value("adaptive-bc"),
        toml::Value::String("adaptive-bc".into())
    );
    assert_eq!(toml_value("\"x y\""), toml::Value::String("x y".into()));
    assert_eq!(
        toml_value("[3,5]"),
        toml::Value::Array(vec![toml::Value::Integer(3), toml::Value::Integer(5)])
    );
    let t = overrides_table(&[("a".into(), "1".into()), ("b".into(), "2s".into())]);
    assert_eq!(t.len(), 2);
}
