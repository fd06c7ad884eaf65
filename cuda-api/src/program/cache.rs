//! The on-disk cache of [`Program`](crate::Program) results: one file per
//! compile, named by the SHA-256 of everything that decides NVRTC's output
//! (the NVRTC version, the output kind, the name, the source, the headers,
//! the options with the architecture, the name expressions), holding the
//! image, the lowered names and the log after a SHA-256 of them that is
//! checked on every read.
//!
//! The trust rule: an entry is handed back as the compiled output of its
//! source, so whoever can write the directory decides what runs. The safe
//! roads read only a directory this user owns that no one else can write
//! (checked on Unix on every read: the directory and the entry belong to
//! the effective user and have no group or other write bit); a directory
//! given with the `unsafe` [`Program::cache_dir`](crate::Program::cache_dir)
//! is the caller's promise instead.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::Output;

/// The environment variable choosing the cache: unset or empty for the
/// user's cache directory (`$XDG_CACHE_HOME/cuda-api/nvrtc`,
/// `~/Library/Caches/cuda-api/nvrtc`, `%LOCALAPPDATA%\cuda-api\nvrtc`), `off`
/// (or `0`, `false`, `no`) for none, anything else a directory. Either
/// directory is used only when it passes the ownership and permission
/// checks of the safe roads (see [`Program`](crate::Program)).
pub const CACHE_ENV: &str = "CUDA_API_NVRTC_CACHE";

const MAGIC: &[u8; 16] = b"CUDA-API-NVRTC1\n";

/// What the cache did for one [`Compiled`](crate::Compiled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheOutcome {
    /// No cache: turned off ([`Program::cache`](crate::Program::cache),
    /// [`CACHE_ENV`]), or the directory failed its checks (a warning
    /// through `log` says why).
    Off,
    /// Not in the cache: compiled, and stored.
    Miss,
    /// Read from the cache; its content hash matched.
    Hit,
    /// An entry was there but failed its checks (truncated, corrupted, its
    /// content hash wrong): compiled again and replaced.
    Replaced,
}

/// Everything that decides what NVRTC writes.
pub(crate) struct Key<'a> {
    pub(crate) nvrtc_version: u32,
    pub(crate) output: Output,
    pub(crate) name: &'a str,
    pub(crate) source: &'a str,
    pub(crate) headers: &'a [(String, String)],
    pub(crate) options: &'a [String],
    pub(crate) name_expressions: &'a [String],
}

impl Key<'_> {
    /// The SHA-256 of every field, each length-prefixed, as hex.
    pub(crate) fn hex(&self) -> String {
        let mut h = Sha256::new();
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(MAGIC);
        field(&self.nvrtc_version.to_le_bytes());
        field(match self.output {
            Output::Ptx => b"ptx",
            Output::Cubin => b"cubin",
        });
        field(self.name.as_bytes());
        field(self.source.as_bytes());
        field(&(self.headers.len() as u64).to_le_bytes());
        for (n, t) in self.headers {
            field(n.as_bytes());
            field(t.as_bytes());
        }
        field(&(self.options.len() as u64).to_le_bytes());
        for o in self.options {
            field(o.as_bytes());
        }
        field(&(self.name_expressions.len() as u64).to_le_bytes());
        for e in self.name_expressions {
            field(e.as_bytes());
        }
        hex(&h.finalize())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A compile's result, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) image: Vec<u8>,
    pub(crate) lowered: Vec<(String, String)>,
    pub(crate) log: String,
}

impl Entry {
    fn body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.image.len() + self.log.len() + 64);
        let mut field = |x: &[u8]| {
            b.extend_from_slice(&(x.len() as u64).to_le_bytes());
            b.extend_from_slice(x);
        };
        field(&self.image);
        field(&(self.lowered.len() as u64).to_le_bytes());
        for (e, l) in &self.lowered {
            field(e.as_bytes());
            field(l.as_bytes());
        }
        field(self.log.as_bytes());
        b
    }

    /// The file: the magic, the SHA-256 of the body, the body.
    pub(crate) fn to_file(&self) -> Vec<u8> {
        let body = self.body();
        let mut f = MAGIC.to_vec();
        f.extend_from_slice(&Sha256::digest(&body));
        f.extend_from_slice(&body);
        f
    }

    /// Reads a file written by [`Entry::to_file`], checking its hash; never
    /// panics on other bytes.
    pub(crate) fn from_file(file: &[u8]) -> Result<Entry, String> {
        let rest = file
            .strip_prefix(MAGIC.as_slice())
            .ok_or("not a cuda-api NVRTC cache entry (bad magic)")?;
        if rest.len() < 32 {
            return Err(format!("truncated: {} bytes", file.len()));
        }
        let (hash, body) = rest.split_at(32);
        if Sha256::digest(body).as_slice() != hash {
            return Err("its content hash does not match its contents".into());
        }
        let mut r = Reader(body);
        let image = r.field()?.to_vec();
        let n = u64::from_le_bytes(r.field()?.try_into().map_err(|_| "bad count")?);
        let mut lowered = Vec::new();
        for _ in 0..n {
            lowered.push((r.string()?, r.string()?));
        }
        let log = r.string()?;
        if !r.0.is_empty() {
            return Err(format!("{} bytes after the last field", r.0.len()));
        }
        Ok(Entry {
            image,
            lowered,
            log,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn field(&mut self) -> Result<&'a [u8], String> {
        if self.0.len() < 8 {
            return Err("truncated field length".into());
        }
        let (len, rest) = self.0.split_at(8);
        let len = u64::from_le_bytes(len.try_into().map_err(|_| "bad length")?);
        let len = usize::try_from(len).map_err(|_| "field too long")?;
        if rest.len() < len {
            return Err(format!("a field of {len} bytes with {} left", rest.len()));
        }
        let (f, rest) = rest.split_at(len);
        self.0 = rest;
        Ok(f)
    }

    fn string(&mut self) -> Result<String, String> {
        String::from_utf8(self.field()?.to_vec()).map_err(|_| "a field is not UTF-8".into())
    }
}

/// What a read found.
pub(crate) enum Read {
    Hit(Entry),
    Miss,
    /// An entry failed its checks: why.
    Corrupt(String),
    /// The directory or entry failed the ownership checks of a safe road.
    Untrusted(String),
}

/// A cache directory, with whether its ownership is checked.
#[derive(Debug, Clone)]
pub(crate) struct Dir {
    path: PathBuf,
    checked: bool,
}

/// The directory of the safe road: [`CACHE_ENV`], else the user's cache
/// directory; `None` when turned off or there is none.
pub(crate) fn default_dir() -> Option<Dir> {
    dir_from(std::env::var(CACHE_ENV).ok().as_deref(), dirs::cache_dir())
}

/// The directory of the safe road for a value of [`CACHE_ENV`] and the
/// user's cache directory.
pub(crate) fn dir_from(env: Option<&str>, user_cache: Option<PathBuf>) -> Option<Dir> {
    let path = match env.map(str::trim) {
        Some(v) if ["off", "0", "false", "no"].contains(&v.to_ascii_lowercase().as_str()) => {
            return None;
        }
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => user_cache?.join("cuda-api").join("nvrtc"),
    };
    Some(Dir::checked(path))
}

impl Dir {
    /// A directory of the safe road: used only when it and its entries
    /// belong to this user and no one else can write them.
    pub(crate) fn checked(path: PathBuf) -> Dir {
        Dir {
            path,
            checked: true,
        }
    }

    /// The directory.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A directory the caller vouches for (no ownership checks).
    pub(crate) fn trusted(path: PathBuf) -> Dir {
        Dir {
            path,
            checked: false,
        }
    }

    fn entry(&self, key: &Key<'_>) -> PathBuf {
        self.path.join(format!("{}.nvrtc", key.hex()))
    }

    pub(crate) fn read(&self, key: &Key<'_>) -> Read {
        if self.checked {
            if !self.path.exists() {
                return Read::Miss;
            }
            if let Err(why) = private(&self.path) {
                return Read::Untrusted(why);
            }
        }
        let path = self.entry(key);
        if !path.exists() {
            return Read::Miss;
        }
        if self.checked
            && let Err(why) = private(&path)
        {
            return Read::Untrusted(why);
        }
        match fs::read(&path) {
            Ok(bytes) => match Entry::from_file(&bytes) {
                Ok(e) => Read::Hit(e),
                Err(why) => Read::Corrupt(format!("{}: {why}", path.display())),
            },
            Err(e) => Read::Corrupt(format!("{}: {e}", path.display())),
        }
    }

    /// Stores `entry` under `key`: written to a temporary file in the
    /// directory (made private if missing), then renamed into place.
    pub(crate) fn write(&self, key: &Key<'_>, entry: &Entry) -> Result<(), String> {
        make_dir(&self.path).map_err(|e| format!("{}: {e}", self.path.display()))?;
        if self.checked {
            private(&self.path)?;
        }
        let path = self.entry(key);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = self
            .path
            .join(format!(".{}.{}.{nanos}.tmp", key.hex(), std::process::id()));
        let written = (|| {
            let mut f = new_file(&tmp)?;
            f.write_all(&entry.to_file())?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(format!("{}: {e}", path.display()));
        }
        Ok(())
    }
}

#[cfg(unix)]
fn make_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

#[cfg(not(unix))]
fn make_dir(path: &Path) -> std::io::Result<()> {
    fs::create_dir_all(path)
}

#[cfg(unix)]
fn new_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn new_file(path: &Path) -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// `Ok` when `path` belongs to the effective user and no one else can write
/// it (Unix; elsewhere the user's profile directories are private by
/// default and nothing is checked).
pub(crate) fn private(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let m = fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if m.file_type().is_symlink() {
            return Err(format!(
                "{} is a symbolic link; the cache must be a real directory of this user",
                path.display()
            ));
        }
        if m.mode() & 0o022 != 0 {
            return Err(format!(
                "{} can be written by other users (mode {:o}); make it private (chmod go-w), or choose another directory with {CACHE_ENV}",
                path.display(),
                m.mode() & 0o7777
            ));
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: geteuid has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            if m.uid() != me {
                return Err(format!(
                    "{} belongs to user {}, not this user ({me}); choose another directory with {CACHE_ENV}",
                    path.display(),
                    m.uid()
                ));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
