use super::*;

const READ: Shape = Shape {
    verb: Verb::Get,
    replay: Replay::Harmless,
};
const BLIND_WRITE: Shape = Shape {
    verb: Verb::Update,
    replay: Replay::OnlyUnhandled,
};
const POLICY: RetryPolicy = RetryPolicy::DEFAULT;

fn answered(code: u16) -> Outcome {
    Outcome::Answered {
        code,
        retry_after: None,
    }
}

fn after(tries: u32, waited_ms: u64) -> Progress {
    Progress {
        tries,
        waited: Duration::from_millis(waited_ms),
    }
}

fn wait_of(next: Next) -> Duration {
    match next {
        Next::Retry { wait, .. } => wait,
        other => panic!("not a retry: {other:?}"),
    }
}

#[test]
fn success_and_client_errors_are_returned() {
    for code in [200, 201, 400, 401, 403, 404, 409, 410, 422, 501] {
        assert_eq!(
            judge(READ, answered(code), after(1, 0), &POLICY, 0.5),
            Next::Return,
            "{code}"
        );
    }
}

#[test]
fn a_read_is_retried_on_429_5xx_and_a_broken_connection() {
    for (outcome, cause) in [
        (answered(429), Cause::Throttled),
        (answered(500), Cause::ServerError(500)),
        (answered(502), Cause::ServerError(502)),
        (answered(503), Cause::ServerError(503)),
        (answered(504), Cause::ServerError(504)),
        (Outcome::Transport, Cause::Transport),
    ] {
        assert!(
            matches!(judge(READ, outcome, after(1, 0), &POLICY, 0.5), Next::Retry { cause: c, .. } if c == cause),
            "{outcome:?}"
        );
    }
}

#[test]
fn a_timeout_or_an_unreached_server_is_never_retried() {
    for outcome in [Outcome::TimedOut, Outcome::Unreached] {
        assert_eq!(
            judge(READ, outcome, after(1, 0), &POLICY, 0.5),
            Next::Return
        );
    }
}

#[test]
fn a_write_without_a_precondition_is_retried_only_on_429() {
    assert!(matches!(
        judge(BLIND_WRITE, answered(429), after(1, 0), &POLICY, 0.5),
        Next::Retry {
            cause: Cause::Throttled,
            ..
        }
    ));
    for outcome in [
        answered(500),
        answered(503),
        answered(504),
        Outcome::Transport,
    ] {
        assert_eq!(
            judge(BLIND_WRITE, outcome, after(1, 0), &POLICY, 0.5),
            Next::Return,
            "{outcome:?}"
        );
    }
}

#[test]
fn backoff_doubles_from_the_first_wait_and_is_capped() {
    // jitter 1.0: the whole backoff.
    let waits: Vec<_> = (1..=6)
        .map(|t| {
            wait_of(judge(
                READ,
                answered(503),
                after(t, 0),
                &RetryPolicy { tries: 9, ..POLICY },
                1.0,
            ))
        })
        .collect();
    let ms = |v: u64| Duration::from_millis(v);
    assert_eq!(
        waits,
        [ms(250), ms(500), ms(1000), ms(2000), ms(4000), ms(8000)]
    );
    let capped = judge(
        READ,
        answered(503),
        after(8, 0),
        &RetryPolicy {
            tries: 9,
            budget: Duration::from_secs(99),
            ..POLICY
        },
        1.0,
    );
    assert_eq!(wait_of(capped), POLICY.max_wait);
}

#[test]
fn jitter_spreads_the_backoff_over_its_upper_half() {
    let w = |j| wait_of(judge(READ, answered(503), after(3, 0), &POLICY, j));
    assert_eq!(w(0.0), Duration::from_millis(500));
    assert_eq!(w(0.5), Duration::from_millis(750));
    assert!(w(0.999) < Duration::from_millis(1000));
}

#[test]
fn retry_after_is_honoured_up_to_the_cap() {
    let throttled = |secs| Outcome::Answered {
        code: 429,
        retry_after: Some(Duration::from_secs(secs)),
    };
    assert_eq!(
        wait_of(judge(READ, throttled(3), after(1, 0), &POLICY, 0.0)),
        Duration::from_secs(3)
    );
    assert_eq!(
        wait_of(judge(READ, throttled(3600), after(1, 0), &POLICY, 0.0)),
        POLICY.max_wait
    );
    // A shorter Retry-After does not shorten the backoff.
    assert_eq!(
        wait_of(judge(READ, throttled(0), after(3, 0), &POLICY, 1.0)),
        Duration::from_secs(1)
    );
}

#[test]
fn the_last_try_gives_up_with_the_cause() {
    assert_eq!(
        judge(READ, answered(429), after(POLICY.tries, 0), &POLICY, 0.5),
        Next::GiveUp {
            cause: Cause::Throttled,
            why: Exhausted::Tries
        }
    );
}

#[test]
fn a_wait_past_the_budget_gives_up() {
    let throttled = Outcome::Answered {
        code: 429,
        retry_after: Some(Duration::from_secs(10)),
    };
    assert!(matches!(
        judge(READ, throttled, after(2, 20_000), &POLICY, 0.0),
        Next::Retry { .. }
    ));
    assert_eq!(
        judge(READ, throttled, after(2, 20_001), &POLICY, 0.0),
        Next::GiveUp {
            cause: Cause::Throttled,
            why: Exhausted::Budget
        }
    );
}

#[test]
fn no_retries_allowed_means_one_attempt() {
    let once = RetryPolicy { tries: 1, ..POLICY };
    assert!(matches!(
        judge(READ, answered(429), after(1, 0), &once, 0.5),
        Next::GiveUp { .. }
    ));
}

#[test]
fn the_code_label_names_the_cause() {
    let codes: Vec<_> = [
        Cause::Throttled,
        Cause::ServerError(500),
        Cause::ServerError(502),
        Cause::ServerError(503),
        Cause::ServerError(504),
        Cause::ServerError(599),
        Cause::Transport,
    ]
    .map(Cause::code)
    .into();
    assert_eq!(
        codes,
        ["429", "500", "502", "503", "504", "5xx", "transport"]
    );
}

/// The `verb` label is the Kubernetes verb, as the API server's own metrics name it.
#[test]
fn the_verb_label_names_the_api_verb() {
    let verbs: Vec<_> = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
        Verb::Other,
    ]
    .map(Verb::as_str)
    .into();
    assert_eq!(
        verbs,
        [
            "get",
            "list",
            "watch",
            "create",
            "update",
            "patch",
            "delete",
            "delete_collection",
            "other"
        ]
    );
}
