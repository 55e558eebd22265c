//! The decision log of `tenure node --log`: slog records as text lines on
//! stderr, `<unix ms> <LEVEL> <message> key=value ...` (every engine
//! decision carries `node`, `term` and the `rule` that made it).

use std::fmt::Write as _;
use std::io::Write as _;

/// A logger writing records at `level` and above to stderr.
pub fn stderr(level: slog::Level) -> slog::Logger {
    slog::Logger::root(Stderr { level }, slog::o!())
}

struct Stderr {
    level: slog::Level,
}

/// Collects a record's key-value pairs as ` key=value`.
struct Pairs(String);

impl slog::Serializer for Pairs {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl slog::Drain for Stderr {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        if !record.level().is_at_least(self.level) {
            return Ok(());
        }
        let mut pairs = Pairs(String::new());
        let _ = slog::KV::serialize(&record.kv(), record, &mut pairs);
        let _ = slog::KV::serialize(values, record, &mut pairs);
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "{} {} {}{}",
            now_ms(),
            record.level().as_short_str(),
            record.msg(),
            pairs.0
        );
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, for the JSON lines.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
