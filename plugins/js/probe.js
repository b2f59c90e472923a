// A test plugin: reports what the locked-down WASI shows a JavaScript
// runtime, as the reason of a rejection (tests/tests/it/plugin_cli.rs).
export const moderation = {
  moderate() {
    const seen = {
      now: Date.now(),
      random: Math.random(),
      performance: performance.now(),
    };
    try {
      console.log('printing is discarded');
      seen.console = 'ok';
    } catch (e) {
      seen.console = String(e);
    }
    return { tag: 'reject', val: JSON.stringify(seen) };
  },
  moderateReaction() {
    return { tag: 'allow' };
  },
  moderatePreview() {
    return { tag: 'allow' };
  },
};
