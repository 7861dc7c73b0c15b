// One explanation on the page: a card with the blended canvas, a caption naming the method and
// the class, and buttons that download the overlay and the heatmap.

import { blend, blobFromBase64 } from './pixels.js';

const METHOD_NAMES = {
  cam: 'CAM',
  gradcam: 'Grad-CAM',
  'gradcam++': 'Grad-CAM++',
  xgradcam: 'XGrad-CAM',
  hirescam: 'HiResCAM',
  layercam: 'LayerCAM',
  scorecam: 'Score-CAM',
  eigencam: 'Eigen-CAM',
};

/** How the page names a method ('gradcam++' → 'Grad-CAM++'). */
export function methodName(method) {
  return METHOD_NAMES[method] ?? method;
}

/**
 * A probability or share in [0, 1] as a percentage with one decimal. One above zero that would
 * read 0.0% reads <0.1%: a class a handful of pixels were given is there, if barely.
 */
export function percent(probability) {
  const shown = (100 * probability).toFixed(1);
  return probability > 0 && shown === '0.0' ? '<0.1%' : `${shown}%`;
}

/** How a card names the class of a class-agnostic map, and what that means. */
const AGNOSTIC = 'class-agnostic';
const AGNOSTIC_NOTE = 'the same map for every class';

export class ExplanationCard {
  /**
   * `explained` is {entry, heatmap}: one entry of /v1/explain's `explanations` and its decoded
   * heatmap; `fileStem` starts the names of the downloaded files; `onEnlarge(card)` shows the
   * card large.
   */
  constructor(template, explained, fileStem, onEnlarge) {
    this.entry = explained.entry;
    this.heatmap = explained.heatmap;
    this.element = template.content.firstElementChild.cloneNode(true);
    this.canvas = this.element.querySelector('canvas');
    this.canvas.width = this.heatmap.width;
    this.canvas.height = this.heatmap.height;
    const detection = this.entry.detection ?? null;
    const agnostic = Boolean(this.entry.class_agnostic);
    const which = detection === null ? '' : `-detection${detection}`;
    const about = agnostic ? '' : `-class${this.entry.class_index}${which}`;
    this.stem = safeName(`${fileStem}-${this.entry.method}${about}`);
    this.caption();
    this.element.dataset.method = this.entry.method;
    if (agnostic) this.element.dataset.classAgnostic = 'true';
    else this.element.dataset.classIndex = String(this.entry.class_index);
    if (detection !== null) this.element.dataset.detection = String(detection);
    this.element.querySelector('[data-enlarge]').addEventListener('click', () => onEnlarge(this));
    this.element.querySelector('[data-download="overlay"]').addEventListener('click', () => {
      this.canvas.toBlob((blob) => save(blob, `${this.stem}-overlay.png`), 'image/png');
    });
    this.element.querySelector('[data-download="heatmap"]').addEventListener('click', () => {
      save(blobFromBase64(this.entry.heatmap, 'image/png'), `${this.stem}-heatmap.png`);
    });
  }

  /** "Method label probability"; a class-agnostic map (Eigen-CAM) is for no class in particular. */
  caption() {
    const { method, label, probability, class_agnostic: agnostic } = this.entry;
    const about = agnostic ? AGNOSTIC : label;
    const text = agnostic ? `${methodName(method)}, ${AGNOSTIC}` : `${methodName(method)}, ${label} (${percent(probability)})`;
    this.element.querySelector('.method').textContent = methodName(method);
    this.element.querySelector('.label').textContent = about;
    this.element.querySelector('.probability').textContent = agnostic ? AGNOSTIC_NOTE : percent(probability);
    this.canvas.setAttribute('aria-label', `${text} heatmap`);
    for (const button of this.element.querySelectorAll('[data-download], [data-enlarge]')) {
      button.setAttribute('aria-label', `${button.title}: ${text}`);
    }
  }

  /** Draw the blend for `view` = {original: ImageData, lut, alpha, boxes: boolean}. */
  paint(view) {
    const context = this.canvas.getContext('2d', { willReadFrequently: true });
    context.putImageData(blend(view.original, this.heatmap, view.lut, view.alpha), 0, 0);
    if (view.boxes) drawBoxes(context, this.entry.boxes ?? []);
  }
}

/** Each box as a white line on a black band, inside its pixels (x1, y1 exclusive). */
function drawBoxes(context, boxes) {
  const { width, height } = context.canvas;
  const line = Math.max(1, Math.round(Math.min(width, height) / 100));
  for (const box of boxes) {
    const [x, y, w, h] = [box.x0, box.y0, box.x1 - box.x0, box.y1 - box.y0];
    strokeInside(context, [x, y, w, h], 3 * line, '#000000');
    strokeInside(context, [x + line, y + line, w - 2 * line, h - 2 * line], line, '#ffffff');
  }
}

/** A rectangle's outline of `line` pixels drawn just inside [x, x + width) × [y, y + height). */
function strokeInside(context, [x, y, width, height], line, color) {
  context.lineWidth = line;
  context.strokeStyle = color;
  const half = line / 2;
  context.strokeRect(x + half, y + half, Math.max(0, width - line), Math.max(0, height - line));
}

function save(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function safeName(text) {
  return text.replace(/[^A-Za-z0-9._-]+/g, '-');
}
