// The models the server could not load: a quiet, folded note under the model choice ("1 model
// not available") that unfolds to each model's name and the server's reason (and its fix).

/** Show `failed` ({name: reason}) in the note's parts; the note hides when nothing failed. */
export function showFailedModels({ note, summary, list }, failed) {
  const entries = Object.entries(failed ?? {});
  note.hidden = entries.length === 0;
  summary.textContent = `${entries.length} ${entries.length === 1 ? 'model' : 'models'} not available`;
  list.replaceChildren(...entries.map(([name, why]) => failedItem(name, why)));
}

function failedItem(name, why) {
  const item = document.createElement('li');
  const strong = document.createElement('strong');
  strong.textContent = name;
  const reason = document.createElement('span');
  reason.className = 'failed-reason';
  reason.textContent = why;
  item.append(strong, ': ', reason);
  return item;
}
