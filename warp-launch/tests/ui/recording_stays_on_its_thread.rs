// A tape's recording guard cannot move to another thread: the recording
// lives in the state of the thread that started it, and a guard dropped
// elsewhere would lose it.
use warp_launch::Tape;

fn main() {
    let mut tape = Tape::new();
    let guard = tape.recording();
    std::thread::scope(|s| {
        s.spawn(move || drop(guard));
    });
}
