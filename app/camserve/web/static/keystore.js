// Where the page keeps the API key: sessionStorage (this tab, until it closes) by default, or
// localStorage when the user asks the page to remember it on this device.

const NAME = 'camserve.apiKey';

/** The stored key, '' when there is none (or storage is blocked). */
export function storedKey() {
  return read(localStorage) || read(sessionStorage) || '';
}

/** Whether the key is kept beyond this tab. */
export function isRemembered() {
  return read(localStorage) !== null;
}

/** Keep `key` for this tab, or on this device when `remember` is set; '' forgets it. */
export function storeKey(key, remember) {
  write(localStorage, remember ? key : '');
  write(sessionStorage, remember ? '' : key);
}

function read(storage) {
  try {
    return storage.getItem(NAME);
  } catch {
    return null;
  }
}

function write(storage, key) {
  try {
    if (key) storage.setItem(NAME, key);
    else storage.removeItem(NAME);
  } catch {
    // Storage blocked (private mode, policy): the key still works for this page's life.
  }
}
