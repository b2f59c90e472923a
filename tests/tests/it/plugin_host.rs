//! The plugin host on its own (I5): every hostile plugin is stopped by the
//! limit meant for it, the process goes on calling well-behaved plugins,
//! and components that do not fit are refused with a clear error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchboard_plugin_host::host::{CallError, CompileError, Verdict};
use switchboard_plugin_host::preview::PreviewVerdict;
use switchboard_plugin_host::{
    Hook, ModerationInput, PluginHost, PluginLimits, PreviewInput, ReactionInput,
};
use switchboard_protocol::content::ContentLimits;
use switchboard_protocol::message::SendOptions;
use switchboard_protocol::previews::{LinkPreview, PreviewImage};
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, MessageId, TenantId, UserId,
};
use switchboard_tests::plugin;

struct Ids {
    tenant: TenantId,
    conversation: ConversationId,
    sender: UserId,
}

fn ids() -> Ids {
    Ids {
        tenant: TenantId::new("acme").unwrap(),
        conversation: ConversationId::new("general").unwrap(),
        sender: UserId::new("alice").unwrap(),
    }
}

fn text(t: &str) -> Content {
    Content::Text { text: t.into() }
}

fn moderate(
    host: &PluginHost,
    name: &str,
    config: &[(&str, &str)],
    content: &Content,
) -> Result<Option<Verdict>, CallError> {
    let compiled = host.compile(Hook::Moderation, &plugin(name)).unwrap();
    moderate_with(host, &compiled, config, content)
}

/// One moderation call of an already compiled plugin.
fn moderate_with(
    host: &PluginHost,
    compiled: &switchboard_plugin_host::host::Compiled,
    config: &[(&str, &str)],
    content: &Content,
) -> Result<Option<Verdict>, CallError> {
    moderate_with_options(host, compiled, config, content, &SendOptions::default())
}

/// One moderation call of a message with `options` (its reply, thread,
/// mentions and custom fields).
fn moderate_with_options(
    host: &PluginHost,
    compiled: &switchboard_plugin_host::host::Compiled,
    config: &[(&str, &str)],
    content: &Content,
    options: &SendOptions,
) -> Result<Option<Verdict>, CallError> {
    let config: BTreeMap<String, String> = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ids = ids();
    host.moderate(
        compiled,
        &Arc::new(config),
        &ModerationInput {
            tenant: &ids.tenant,
            conversation_id: &ids.conversation,
            kind: ConversationKind::Group,
            member_count: 3,
            sender: &ids.sender,
            content,
            options,
        },
        &ContentLimits::default(),
    )
}

/// The default limits but for a deadline a loaded machine keeps: a
/// JavaScript call (a fresh instance of a 12 MB engine) takes a few ms
/// on an idle machine and has taken over the default 20 on a busy one.
/// The tests that use it check what plugins decide, not how fast; the
/// deadline has tests of its own.
fn unhurried() -> PluginLimits {
    PluginLimits {
        deadline: Duration::from_secs(1),
        ..PluginLimits::default()
    }
}

#[test]
fn the_word_list_plugin_masks_rejects_and_allows() {
    let host = PluginHost::new(PluginLimits::default()).unwrap();
    assert_eq!(
        moderate(&host, "word-list", &[], &text("well Darn it")).unwrap(),
        Some(Verdict::Rewrite(text("well **** it")))
    );
    assert_eq!(
        moderate(
            &host,
            "word-list",
            &[("words", "spam")],
            &text("well darn it")
        )
        .unwrap(),
        Some(Verdict::Allow),
        "the configured list replaces the default"
    );
    assert!(matches!(
        moderate(&host, "word-list", &[("action", "reject")], &text("heck")).unwrap(),
        Some(Verdict::Reject(_))
    ));
    let ciphertext = Content::Ciphertext {
        algorithm: "x".into(),
        body: "aGVjaw==".into(),
    };
    assert_eq!(
        moderate(&host, "word-list", &[], &ciphertext).unwrap(),
        None,
        "ciphertext is never passed to a plugin"
    );
}

#[test]
fn every_hostile_plugin_is_stopped_by_its_limit_and_the_host_goes_on() {
    // A deadline far above what any of them needs to hit its own limit,
    // so that on a busy machine the intended limit still trips first (at
    // 20 ms, a descheduled thread made memory-bomb and huge-output miss
    // their deadline before their memory cap). `spin` is stopped by its
    // fuel then; the deadline has its own test below.
    let limits = PluginLimits {
        deadline: Duration::from_secs(2),
        ..PluginLimits::default()
    };
    let host = PluginHost::new(limits.clone()).unwrap();
    type Expected = fn(&CallError) -> bool;
    let cases: [(&str, Expected); 5] = [
        ("spin", |e| {
            matches!(e, CallError::Deadline(_) | CallError::Fuel)
        }),
        ("memory-bomb", |e| matches!(e, CallError::Memory)),
        ("deep-recursion", |e| matches!(e, CallError::Stack)),
        ("trap", |e| matches!(e, CallError::Trap(_))),
        ("huge-output", |e| {
            matches!(e, CallError::Output(_) | CallError::Memory)
        }),
    ];
    for (name, expected) in cases {
        // Compile first: the bound below is on the call alone.
        host.compile(Hook::Moderation, &plugin(name)).unwrap();
        let started = Instant::now();
        let err = moderate(&host, name, &[], &text("an attack")).unwrap_err();
        let took = started.elapsed();
        assert!(expected(&err), "{name}: unexpected failure {err:?}");
        // Generous against a loaded CI machine, but far from unbounded.
        assert!(
            took < limits.deadline + Duration::from_millis(500),
            "{name} ran for {took:?}"
        );
        // The same host serves a well-behaved plugin right after.
        assert_eq!(
            moderate(&host, "word-list", &[], &text("fine")).unwrap(),
            Some(Verdict::Allow),
            "after {name}"
        );
    }
}

#[test]
fn the_deadline_stops_a_spinning_plugin_even_with_fuel_to_spare() {
    let limits = PluginLimits {
        fuel: u64::MAX / 2,
        deadline: Duration::from_millis(30),
        ..PluginLimits::default()
    };
    let host = PluginHost::new(limits).unwrap();
    host.compile(Hook::Moderation, &plugin("spin")).unwrap();
    let started = Instant::now();
    let err = moderate(&host, "spin", &[], &text("attack")).unwrap_err();
    assert!(matches!(err, CallError::Deadline(_)), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(29));
}

#[test]
fn calls_beyond_the_pool_wait_instead_of_failing() {
    let limits = PluginLimits {
        pool_size: 2,
        ..PluginLimits::default()
    };
    let host = Arc::new(PluginHost::new(limits).unwrap());
    host.compile(Hook::Moderation, &plugin("word-list"))
        .unwrap();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let host = host.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let v = moderate(&host, "word-list", &[], &text("darn")).unwrap();
                    assert_eq!(v, Some(Verdict::Rewrite(text("****"))));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(host.counts(Hook::Moderation).failures, 0);
}

#[test]
fn components_that_do_not_fit_are_refused_with_a_clear_error() {
    let host = PluginHost::new(PluginLimits::default()).unwrap();
    let none = BTreeMap::new();
    let err = host
        .validate(Hook::Moderation, b"not wasm at all", &none)
        .unwrap_err();
    assert!(matches!(err, CompileError::NotAComponent(_)), "{err}");
    // A core module is WebAssembly but not a component.
    let core_module = b"\0asm\x01\0\0\0";
    let err = host
        .validate(Hook::Moderation, core_module, &none)
        .unwrap_err();
    assert!(matches!(err, CompileError::NotAComponent(_)), "{err}");
    // A component header over bytes the engine cannot read: the engine's
    // error is kept as the source, and the text reads as before.
    let broken = b"\0asm\x0d\0\x01\0\xff\xff";
    let err = host.validate(Hook::Moderation, broken, &none).unwrap_err();
    assert!(matches!(err, CompileError::Unreadable { .. }), "{err}");
    assert!(
        err.to_string().starts_with("not a WebAssembly component: "),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some(), "{err}");
    // An edit policy is not a moderator.
    let err = host
        .validate(Hook::Moderation, &plugin("edit-window"), &none)
        .unwrap_err();
    assert!(matches!(err, CompileError::WrongWorld { .. }), "{err}");
    assert!(err.to_string().contains("moderator"), "{err}");
    // A moderator that traps on the trial call's message fails it.
    let trap_on_trial = BTreeMap::from([("trigger".to_owned(), "hello".to_owned())]);
    let err = host
        .validate(Hook::Moderation, &plugin("trap"), &trap_on_trial)
        .unwrap_err();
    assert!(matches!(err, CompileError::TrialCall(_)), "{err}");
    let small = PluginHost::new(PluginLimits {
        max_component_bytes: 1000,
        ..PluginLimits::default()
    })
    .unwrap();
    let err = small
        .validate(Hook::Moderation, &plugin("word-list"), &none)
        .unwrap_err();
    assert!(matches!(err, CompileError::TooLarge { .. }), "{err}");
    // The fitting ones pass.
    for (hook, name) in [
        (Hook::Moderation, "word-list"),
        (Hook::EditPolicy, "edit-window"),
        (Hook::FanOut, "member-count"),
    ] {
        host.validate(hook, &plugin(name), &none)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

/// `word-list` with a custom section of its own.
fn variant(n: u8) -> Vec<u8> {
    switchboard_tests::plugin_variant("word-list", n)
}

#[test]
fn the_compiled_code_cache_keeps_the_most_recently_used_up_to_its_bound() {
    let host = PluginHost::new(PluginLimits {
        compiled_cache_entries: 2,
        ..PluginLimits::default()
    })
    .unwrap();
    let compile = |n: u8| host.compile(Hook::Moderation, &variant(n)).unwrap();
    // At the bound: both kept, and a second compile is the first one.
    let first = compile(0);
    let second = compile(1);
    assert_eq!(host.compiled_cached(), 2);
    assert!(
        Arc::ptr_eq(&first, &compile(0)),
        "a cached compile is reused"
    );
    // Past it: still two, and the least recently used (1) was forgotten.
    let third = compile(2);
    assert_eq!(host.compiled_cached(), 2);
    assert!(Arc::ptr_eq(&first, &compile(0)), "recently used stays");
    assert!(Arc::ptr_eq(&third, &compile(2)));
    assert!(
        !Arc::ptr_eq(&second, &compile(1)),
        "forgotten, compiled again"
    );
    assert_eq!(host.compiled_cached(), 2);
    // Forgotten from the cache is not gone: a version in use keeps its own.
    let verdict = moderate_with(&host, &second, &[], &text("hello"));
    assert!(verdict.is_ok(), "{verdict:?}");
}

/// The cache is bounded in bytes of compiled code too: at the bound both
/// variants stay; a byte past it, the least recently used goes; and the
/// newest stays whatever its size.
#[test]
fn the_compiled_code_cache_keeps_within_its_bytes() {
    let one = {
        let host = PluginHost::new(PluginLimits::default()).unwrap();
        host.compile(Hook::Moderation, &variant(0))
            .unwrap()
            .code_bytes
    };
    assert!(one > 0);
    let cache = |bytes: usize| {
        PluginHost::new(PluginLimits {
            compiled_cache_bytes: bytes,
            ..PluginLimits::default()
        })
        .unwrap()
    };
    let at_bound = cache(2 * one);
    at_bound.compile(Hook::Moderation, &variant(0)).unwrap();
    at_bound.compile(Hook::Moderation, &variant(1)).unwrap();
    assert_eq!(at_bound.compiled_cached(), 2);
    assert_eq!(at_bound.compiled_cached_bytes(), 2 * one);
    let past = cache(2 * one - 1);
    let first = past.compile(Hook::Moderation, &variant(0)).unwrap();
    let second = past.compile(Hook::Moderation, &variant(1)).unwrap();
    assert_eq!(past.compiled_cached(), 1);
    assert_eq!(past.compiled_cached_bytes(), one);
    assert!(Arc::ptr_eq(
        &second,
        &past.compile(Hook::Moderation, &variant(1)).unwrap()
    ));
    assert!(!Arc::ptr_eq(
        &first,
        &past.compile(Hook::Moderation, &variant(0)).unwrap()
    ));
    let tiny = cache(1);
    tiny.compile(Hook::Moderation, &variant(0)).unwrap();
    assert_eq!(tiny.compiled_cached(), 1, "the newest stays");
}

/// Issue 17, item 2: the JavaScript word-list (ComponentizeJS) decides as
/// the Rust one does, with the default memory and fuel, each call in a
/// fresh instance of its 12 MB engine.
#[test]
fn the_javascript_word_list_decides_like_the_rust_one() {
    let host = PluginHost::new(unhurried()).unwrap();
    let js = host
        .compile(Hook::Moderation, &plugin("js-word-list"))
        .unwrap();
    println!(
        "compiled JavaScript engine: {} bytes of code",
        js.code_bytes
    );
    let rust = host
        .compile(Hook::Moderation, &plugin("word-list"))
        .unwrap();
    for (config, sample) in [
        (&[][..], "oh Darn it, heck"),
        (&[][..], "all fine here"),
        (&[("action", "reject")][..], "darn"),
        (&[("words", "spam, eggs")][..], "Spam and eggs and ham"),
    ] {
        let from_js = moderate_with(&host, &js, config, &text(sample)).unwrap();
        let from_rust = moderate_with(&host, &rust, config, &text(sample)).unwrap();
        assert_eq!(from_js, from_rust, "{sample:?} with {config:?}");
    }
}

/// What the locked-down WASI shows a JavaScript runtime: the wall clock
/// reads the call's start, the monotonic clock stands still, randomness
/// repeats from call to call, and printing goes nowhere.
#[test]
fn a_javascript_runtime_sees_a_still_clock_and_repeating_randomness() {
    let host = PluginHost::new(unhurried()).unwrap();
    let probe = host.compile(Hook::Moderation, &plugin("js-probe")).unwrap();
    let seen = || {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64;
        let Some(Verdict::Reject(report)) = moderate_with(&host, &probe, &[], &text("x")).unwrap()
        else {
            panic!("the probe rejects with its report");
        };
        let seen: serde_json::Value = serde_json::from_str(&report).unwrap();
        (before, seen)
    };
    let (before, first) = seen();
    let (_, second) = seen();
    let now = first["now"].as_f64().unwrap();
    assert!(now >= before - 1.0 && now < before + 10_000.0, "{first}");
    assert_eq!(first["performance"], 0, "{first}");
    assert_eq!(first["random"], second["random"], "{first} {second}");
    assert_eq!(first["console"], "ok", "{first}");
}

/// A reaction as a moderator sees it, in a group of three.
fn react_with(
    host: &PluginHost,
    compiled: &switchboard_plugin_host::host::Compiled,
    config: &[(&str, &str)],
    emoji: &str,
) -> Result<Option<Result<(), String>>, CallError> {
    let config: BTreeMap<String, String> = config
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ids = ids();
    host.moderate_reaction(
        compiled,
        &Arc::new(config),
        &ReactionInput {
            tenant: &ids.tenant,
            conversation_id: &ids.conversation,
            kind: ConversationKind::Group,
            member_count: 3,
            sender: &ids.sender,
            message_id: MessageId::from_u64(7),
            emoji,
        },
    )
}

/// v1.1 in the plugin package (0.2.0, and every package after it): a moderator
/// sees a message's mentions and the conversation's size, and decides
/// reactions as their own kind; components built against 0.1.0 load as
/// before, and see no reactions.
#[test]
fn a_moderator_sees_mentions_and_reactions_and_older_ones_still_load() {
    let host = PluginHost::new(unhurried()).unwrap();
    let etiquette = host
        .compile(Hook::Moderation, &plugin("etiquette"))
        .unwrap();
    assert_eq!(etiquette.world(), "switchboard:plugin/moderator@0.4.0");
    let blocked = react_with(&host, &etiquette, &[], "🖕").unwrap();
    assert_eq!(blocked, Some(Err("that emoji is not allowed here".into())));
    assert_eq!(
        react_with(&host, &etiquette, &[], "👍").unwrap(),
        Some(Ok(()))
    );
    let custom = [("blocked_emoji", "🍆, 💩")];
    assert!(matches!(
        react_with(&host, &etiquette, &custom, "💩").unwrap(),
        Some(Err(_))
    ));
    assert_eq!(
        react_with(&host, &etiquette, &custom, "🖕").unwrap(),
        Some(Ok(()))
    );

    // Mentions: past `max_mentions` (at it is fine).
    let ids = ids();
    let call = |options: &SendOptions| {
        host.moderate(
            &etiquette,
            &Arc::new(BTreeMap::from([(
                "max_mentions".to_owned(),
                "2".to_owned(),
            )])),
            &ModerationInput {
                tenant: &ids.tenant,
                conversation_id: &ids.conversation,
                kind: ConversationKind::Channel,
                member_count: 80,
                sender: &ids.sender,
                content: &text("hi"),
                options,
            },
            &ContentLimits::default(),
        )
        .unwrap()
    };
    let users = |n: usize| -> Vec<UserId> {
        (0..n)
            .map(|i| UserId::new(format!("u{i}")).unwrap())
            .collect()
    };
    let two = SendOptions {
        mentions: users(2),
        ..SendOptions::default()
    };
    assert_eq!(call(&two), Some(Verdict::Allow));
    let three = SendOptions {
        mentions: users(3),
        ..SendOptions::default()
    };
    assert!(matches!(call(&three), Some(Verdict::Reject(_))));
    let everyone = SendOptions {
        mention_all: true,
        ..SendOptions::default()
    };
    assert!(matches!(call(&everyone), Some(Verdict::Reject(r)) if r.contains("50 members")));

    // A 0.1.0 moderator (the Rust word-list) loads, moderates messages,
    // and is not asked about reactions.
    let older = host
        .compile(Hook::Moderation, &plugin("word-list"))
        .unwrap();
    assert_eq!(older.world(), "switchboard:plugin/moderator@0.1.0");
    assert_eq!(react_with(&host, &older, &[], "🖕").unwrap(), None);
    // The JavaScript word-list targets 0.4.0 and refuses a listed word
    // as a reaction.
    let js = host
        .compile(Hook::Moderation, &plugin("js-word-list"))
        .unwrap();
    assert_eq!(js.world(), "switchboard:plugin/moderator@0.4.0");
    assert!(matches!(
        react_with(&host, &js, &[], ":darn:").unwrap(),
        Some(Err(_))
    ));
    assert_eq!(react_with(&host, &js, &[], "👍").unwrap(), Some(Ok(())));
    // Edit policy and fan-out in 0.4.0 (the SDK's examples).
    for (hook, name) in [
        (Hook::EditPolicy, "edit-window"),
        (Hook::FanOut, "member-count"),
    ] {
        let compiled = host.compile(hook, &plugin(name)).unwrap();
        assert!(
            compiled.world().ends_with("@0.4.0"),
            "{name}: {}",
            compiled.world()
        );
    }
}

/// v1.3 in the plugin package (0.3.0): a moderator sees a custom message
/// as its own kind (type, data, fallback text) and a message's `custom`
/// fields; its rewrite of a custom message keeps what it names. An older
/// moderator sees the fallback text, and its rewrite of that text becomes
/// the new fallback text.
#[test]
fn a_moderator_sees_custom_messages_and_fields_and_older_ones_their_text() {
    let host = PluginHost::new(unhurried()).unwrap();
    let order = |fallback: &str| -> Content {
        serde_json::from_value(serde_json::json!({
            "kind": "custom", "type": "shop.order", "data": {"order": 7}, "fallback_text": fallback,
        }))
        .unwrap()
    };
    let moderate =
        |name: &str, config: &[(&str, &str)], content: &Content, options: &SendOptions| {
            let compiled = host.compile(Hook::Moderation, &plugin(name)).unwrap();
            moderate_with_options(&host, &compiled, config, content, options).unwrap()
        };
    let plain = SendOptions::default();

    // The type: etiquette allows the listed ones only.
    let only_orders = [("custom_types", "shop.order, shop.refund")];
    assert_eq!(
        moderate("etiquette", &only_orders, &order("Order #7"), &plain),
        Some(Verdict::Allow)
    );
    let location: Content =
        serde_json::from_value(serde_json::json!({"kind": "custom", "type": "location"})).unwrap();
    assert!(matches!(
        moderate("etiquette", &only_orders, &location, &plain),
        Some(Verdict::Reject(r)) if r.contains("shop.order, shop.refund")
    ));
    assert_eq!(
        moderate("etiquette", &[], &location, &plain),
        Some(Verdict::Allow)
    );
    // The message's own fields: etiquette bounds them.
    let fields = SendOptions {
        custom: serde_json::from_value(serde_json::json!({"ticket": 42})).unwrap(),
        ..SendOptions::default()
    };
    // {"ticket":42} is 13 bytes.
    assert_eq!(
        moderate(
            "etiquette",
            &[("max_custom_bytes", "13")],
            &text("hi"),
            &fields
        ),
        Some(Verdict::Allow)
    );
    assert!(matches!(
        moderate(
            "etiquette",
            &[("max_custom_bytes", "12")],
            &text("hi"),
            &fields
        ),
        Some(Verdict::Reject(_))
    ));

    // The JavaScript word-list (0.4.0) masks the fallback text; type and
    // data stay.
    assert_eq!(
        moderate("js-word-list", &[], &order("darn late"), &plain),
        Some(Verdict::Rewrite(order("**** late")))
    );
    // The Rust word-list (0.1.0) sees the text alone; its rewrite is the
    // new fallback text.
    assert_eq!(
        moderate("word-list", &[], &order("darn late"), &plain),
        Some(Verdict::Rewrite(order("**** late")))
    );
    assert_eq!(
        moderate("word-list", &[], &order("on time"), &plain),
        Some(Verdict::Allow)
    );
}

/// v1.3 in the plugin package (0.4.0): a moderator keeps, drops or
/// rewrites a link preview's card; a rewrite keeps the message's link and
/// cannot bring an image of its own. Older moderators are not asked.
#[test]
fn a_moderator_decides_link_previews_and_older_ones_are_not_asked() {
    let host = PluginHost::new(unhurried()).unwrap();
    let ids = ids();
    let image = PreviewImage {
        blob_ref: "b1".into(),
        mime: "image/png".into(),
        size: 64,
    };
    let card = |title: &str, image: Option<PreviewImage>| LinkPreview {
        url: "https://news.example.com/a".into(),
        title: Some(title.into()),
        description: Some("darn good".into()),
        site_name: None,
        image,
    };
    let decide = |name: &str, config: &[(&str, &str)], card: &LinkPreview| {
        let compiled = host.compile(Hook::Moderation, &plugin(name)).unwrap();
        let config: BTreeMap<String, String> = config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        host.moderate_preview(
            &compiled,
            &Arc::new(config),
            &PreviewInput {
                tenant: &ids.tenant,
                conversation_id: &ids.conversation,
                kind: ConversationKind::Group,
                member_count: 3,
                sender: &ids.sender,
                message_id: MessageId::from_u64(7),
                card,
            },
        )
        .unwrap()
    };
    let plain = card("News", Some(image.clone()));
    // The JavaScript word-list masks the texts, or drops the card.
    let Some(PreviewVerdict::Rewrite(masked)) = decide("js-word-list", &[], &plain) else {
        panic!("masked")
    };
    assert_eq!(masked.description.as_deref(), Some("**** good"));
    assert_eq!(
        (masked.url.as_str(), masked.image.as_ref()),
        (plain.url.as_str(), Some(&image))
    );
    assert_eq!(
        decide("js-word-list", &[("action", "reject")], &plain),
        Some(PreviewVerdict::Drop)
    );
    let clean = LinkPreview {
        description: None,
        ..plain.clone()
    };
    assert_eq!(
        decide("js-word-list", &[], &clean),
        Some(PreviewVerdict::Allow)
    );
    // Etiquette drops the cards of blocked sites (and their subdomains),
    // and takes images away where told.
    for site in ["example.com", "news.example.com"] {
        assert_eq!(
            decide("etiquette", &[("blocked_sites", site)], &plain),
            Some(PreviewVerdict::Drop)
        );
    }
    assert_eq!(
        decide("etiquette", &[("blocked_sites", "ample.com")], &plain),
        Some(PreviewVerdict::Allow)
    );
    assert_eq!(
        decide("etiquette", &[("preview_images", "false")], &plain),
        Some(PreviewVerdict::Rewrite(card("News", None)))
    );
    // The word-list of 0.1.0 sees no previews.
    assert_eq!(decide("word-list", &[], &plain), None);
}
