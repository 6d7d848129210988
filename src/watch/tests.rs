//! Unit tests of `watch` (a child module: they see its private items).

use super::*;
use kube::core::Status;
use kube::runtime::watcher;

fn status(code: u16) -> Status {
    Status {
        code,
        message: format!("m{code}"),
        ..Status::default()
    }
}

#[test]
fn a_410_on_opening_a_watch_lists_again_and_denials_are_reported() {
    let open = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(410))));
    assert_eq!(classify(&open), Failure::Transient { relist: true });
    let event = watcher::Error::WatchError(Box::new(status(410)));
    assert_eq!(classify(&event), Failure::Transient { relist: false });
    let denied = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(403))));
    assert_eq!(classify(&denied), Failure::Denied("m403".into()));
    let denied = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status(403))));
    assert_eq!(classify(&denied), Failure::Denied("m403".into()));
    // Expired credentials: kube reads a token file again within a minute.
    let expired = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(401))));
    assert_eq!(classify(&expired), Failure::Transient { relist: false });
    // An ERROR in an open watch's stream lists again and keeps the view.
    for code in [401, 403] {
        let event = watcher::Error::WatchError(Box::new(status(code)));
        assert_eq!(classify(&event), Failure::Transient { relist: true });
    }
    assert_eq!(
        classify(&watcher::Error::NoResourceVersion),
        Failure::Transient { relist: false }
    );
}
