// One explanation enlarged in a modal dialog, side by side with the original image (stacked on
// a narrow screen). Escape, the Close button or a click beside the pictures closes it.

import { methodName, percent } from './cards.js';

export class Zoom {
  constructor(dialog) {
    this.dialog = dialog;
    this.title = dialog.querySelector('.zoom-title');
    this.original = dialog.querySelector('#zoom-original');
    this.explained = dialog.querySelector('#zoom-explained');
    this.caption = dialog.querySelector('#zoom-caption');
    dialog.querySelector('#zoom-close').addEventListener('click', () => dialog.close());
    dialog.addEventListener('click', (event) => {
      if (event.target === dialog) dialog.close();
    });
  }

  /** Show `card` as drawn now, beside `original` (ImageData). */
  show(card, original) {
    const { method, label, probability } = card.entry;
    const text = `${methodName(method)}, ${label} (${percent(probability)})`;
    this.title.textContent = text;
    this.caption.textContent = text;
    this.explained.setAttribute('aria-label', `${text} heatmap`);
    copyCanvas(card.canvas, this.explained);
    this.original.width = original.width;
    this.original.height = original.height;
    this.original.getContext('2d').putImageData(original, 0, 0);
    this.dialog.showModal();
  }
}

function copyCanvas(source, target) {
  target.width = source.width;
  target.height = source.height;
  target.getContext('2d').drawImage(source, 0, 0);
}
