// The page's checkbox lists (methods, classes): one labelled checkbox per choice, what is
// checked, and the rule that something stays chosen.

/**
 * A checkbox labelled `text`, with a muted `note` after it ('' for none). The text and the note
 * flow as one line of words beside the box, so a long note wraps under the text, never the name.
 */
export function choice(name, value, text, checked, note = '') {
  const label = document.createElement('label');
  label.className = 'choice';
  const input = document.createElement('input');
  input.type = 'checkbox';
  input.name = name;
  input.value = value;
  input.checked = checked;
  const words = document.createElement('span');
  words.className = 'choice-text';
  words.append(` ${text}`);
  if (note) {
    const detail = document.createElement('span');
    detail.className = 'probability';
    detail.textContent = note;
    words.append(' ', detail);
  }
  label.append(input, words);
  return label;
}

/** The values of the checked boxes in `group`, in page order. */
export function checkedValues(group) {
  return Array.from(group.querySelectorAll('input:checked'), (input) => input.value);
}

/** Unchecking the last box of a list checks it again: something must stay chosen. */
export function keepOneChecked(group, changed) {
  if (checkedValues(group).length === 0) changed.checked = true;
}
