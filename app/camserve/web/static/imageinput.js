// The three ways to give the page an image: the file picker (opened by the drop zone, which is
// a button, so Enter and Space work), a file dropped anywhere on the page, and a pasted image.

/** Call `onFile(file)` for every image the user picks, drops or pastes. */
export function watchImageInput({ dropZone, fileInput, onFile }) {
  dropZone.addEventListener('click', () => fileInput.click());
  fileInput.addEventListener('change', () => {
    const file = fileInput.files[0];
    fileInput.value = ''; // so choosing the same file again fires another change
    if (file) onFile(file);
  });

  window.addEventListener('dragover', (event) => {
    if (!carriesFiles(event.dataTransfer)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = 'copy';
    dropZone.classList.add('dragging');
  });
  window.addEventListener('dragleave', (event) => {
    if (event.relatedTarget === null) dropZone.classList.remove('dragging');
  });
  window.addEventListener('drop', (event) => {
    dropZone.classList.remove('dragging');
    const file = firstFile(event.dataTransfer);
    if (!file) return;
    event.preventDefault(); // the browser would otherwise open the file instead of the page
    onFile(file);
  });

  document.addEventListener('paste', (event) => {
    const file = firstFile(event.clipboardData);
    if (!file) return; // plain text: leave it to the focused field
    event.preventDefault();
    onFile(file);
  });
}

function carriesFiles(transfer) {
  return Boolean(transfer) && Array.from(transfer.types).includes('Files');
}

function firstFile(transfer) {
  if (!transfer) return null;
  if (transfer.files.length > 0) return transfer.files[0];
  for (const item of Array.from(transfer.items ?? [])) {
    if (item.kind === 'file') return item.getAsFile();
  }
  return null;
}
