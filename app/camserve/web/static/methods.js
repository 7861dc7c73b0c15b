// The method checkboxes: one per method the chosen model offers. CAM answers only at the layers
// the server lists in the model's `cam_layers` (those that feed its pooling and classifier);
// elsewhere its box is disabled with a note naming where it applies. Score-CAM shows its
// expected time at the layer, and is disabled where that exceeds the server's deadline
// (scorecam.js). So the page never sends a request that can only be refused.

import { methodName } from './cards.js';
import { checkedValues, choice } from './choices.js';
import { scoreCamCost } from './scorecam.js';

/**
 * Why `method` cannot be asked for at `layer` of `model` (a short phrase), or '' when it can. A
 * server that does not list `cam_layers` is trusted to answer.
 */
export function methodRefusal(model, layer, method) {
  if (method !== 'cam' || !Array.isArray(model?.cam_layers) || model.cam_layers.includes(layer)) {
    return '';
  }
  const where = model.cam_layers.at(-1);
  return where === undefined ? 'not for this model' : `only at layer ${where}`;
}

/** The sentence a disabled method's box tells on hover. */
function refusalTitle(model, method) {
  const where = model.cam_layers.at(-1);
  const need = 'a layer that feeds global average pooling and one linear classifier';
  return where === undefined
    ? `${methodName(method)} needs ${need}, and this model has none.`
    : `${methodName(method)} needs ${need}: here, layer ${where}.`;
}

/**
 * How the box of `method` at `layer` reads: {usable, note, title} (a note and a title only
 * where there is something to say).
 */
function offer(model, layer, method, deadline) {
  const refusal = methodRefusal(model, layer, method);
  if (refusal) return { usable: false, note: refusal, title: refusalTitle(model, method) };
  const cost = scoreCamCost(model, layer, method, deadline);
  if (cost) return { usable: cost.fits, note: cost.note, title: cost.title };
  return { usable: true, note: '', title: '' };
}

/**
 * Fill `list` with a checkbox per method of `model` at `layer`, under the server's `deadline`
 * in seconds (undefined when it does not say): the methods checked so far stay checked where
 * they still apply; if none does, the model's `fallback` (or its first method that applies) is
 * checked.
 */
export function fillMethods(list, model, layer, fallback, deadline) {
  const methods = model?.methods ?? [];
  const offers = new Map(methods.map((method) => [method, offer(model, layer, method, deadline)]));
  const usable = methods.filter((method) => offers.get(method).usable);
  const kept = checkedValues(list).filter((method) => usable.includes(method));
  const checked = new Set(kept.length > 0 ? kept : [usable.includes(fallback) ? fallback : usable[0]]);
  list.replaceChildren(
    ...methods.map((method) => {
      const { usable: offered, note, title } = offers.get(method);
      const label = choice('method', method, methodName(method), checked.has(method), note);
      if (!offered) {
        label.classList.add('unavailable');
        label.querySelector('input').disabled = true;
      }
      if (title) label.title = title;
      return label;
    }),
  );
}
