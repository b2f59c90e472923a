// The word-list moderator in JavaScript (the Rust one is ../word-list).
// Configuration:
// - `words`: comma-separated, matched as whole words, ignoring case
//   (default `darn,heck`);
// - `action`: `mask` (default) replaces each letter of a listed word with
//   `*`; `reject` refuses the message.
// Text, media captions and custom messages' fallback texts are checked;
// everything else is allowed. A reaction whose emoji is a listed word (as
// `:darn:`) is refused. A link preview whose title, description or site
// name has a listed word is masked the same way (`reject`: shows no
// card).
import { config, log } from 'switchboard:plugin/host@0.4.0';

function listed() {
  return (config('words') ?? 'darn,heck')
    .split(',')
    .map((w) => w.trim().toLowerCase())
    .filter((w) => w.length > 0);
}

/**
 * `text` with every listed word's letters replaced by `*`.
 * @param {string} text
 * @param {string[]} words
 */
function mask(text, words) {
  return text.replace(/[A-Za-z0-9]+/g, (word) =>
    words.includes(word.toLowerCase()) ? '*'.repeat(word.length) : word,
  );
}

/** @type {typeof import('switchboard:plugin/moderation@0.4.0')} */
export const moderation = {
  moderate(message) {
    const content = message.content;
    const text =
      content.tag === 'text' ? content.val : content.tag === 'custom' ? content.val.fallbackText : content.val.caption;
    if (text === undefined) return { tag: 'allow' };
    const masked = mask(text, listed());
    if (masked === text) return { tag: 'allow' };
    if (config('action') === 'reject') {
      log('info', 'rejected a message with a listed word');
      return { tag: 'reject', val: 'the message contains a word this community does not allow' };
    }
    if (content.tag === 'text') return { tag: 'rewrite', val: { tag: 'text', val: masked } };
    if (content.tag === 'custom') return { tag: 'rewrite', val: { tag: 'custom', val: { ...content.val, fallbackText: masked } } };
    return { tag: 'rewrite', val: { tag: content.tag, val: { ...content.val, caption: masked } } };
  },
  moderatePreview(preview) {
    const words = listed();
    const card = preview.card;
    const masked = {
      ...card,
      title: card.title === undefined ? undefined : mask(card.title, words),
      description: card.description === undefined ? undefined : mask(card.description, words),
      siteName: card.siteName === undefined ? undefined : mask(card.siteName, words),
    };
    if (masked.title === card.title && masked.description === card.description && masked.siteName === card.siteName) {
      return { tag: 'allow' };
    }
    if (config('action') === 'reject') return { tag: 'drop' };
    return { tag: 'rewrite', val: masked };
  },
  moderateReaction(reaction) {
    const word = reaction.emoji.replace(/^:|:$/g, '').toLowerCase();
    if (listed().includes(word)) {
      return { tag: 'reject', val: 'that reaction is a word this community does not allow' };
    }
    return { tag: 'allow' };
  },
};
