// The page's controller. It lists the models, sends the image to /v1/explain, keeps every
// explanation it got (by method and class, or by method and detection for a detector), and
// repaints them in the browser when only the opacity, the colormap or the boxes change, so those
// need no new request. A detector's boxes are drawn over the cards and choosing one shows its
// maps; a segmenter's masks are a layer the "Show the predicted masks" checkbox toggles.

import { Api } from './api.js';
import { ExplanationCard, methodName, percent } from './cards.js';
import { checkedValues, choice, keepOneChecked } from './choices.js';
import { drawDetections, listDetections, stageOf } from './detections.js';
import { DetectorAnswers } from './detector.js';
import { showFailedModels } from './failedmodels.js';
import { ResultsGrid } from './grid.js';
import { watchImageInput } from './imageinput.js';
import { isRemembered, storedKey, storeKey } from './keystore.js';
import { fillMethods } from './methods.js';
import { describeChanges, ModelWatch } from './modelwatch.js';
import { decodeHeatmap, decodeImage, loadColormaps } from './pixels.js';
import { ProgressBar } from './progressbar.js';
import { showReport } from './reportbadges.js';
import { ReportWatch } from './reportwatch.js';
import { listSamples, markChosenSample, sampleFile, showSamples } from './samples.js';
import { addMaskLayer, isBackground, maskImage, showLegend, showMaskLayers } from './segments.js';
import { Zoom } from './zoom.js';

const COLORMAPS_URL = '/static/colormaps.json';
const DEFAULT_METHOD = 'gradcam';
const MODELS_RETRY_MS = 2000;
const PREDICTIONS = 5; // how many top predictions the page offers as classes
// The page blends the heatmap itself and draws the boxes: it needs no overlay from the server.
const INCLUDE = 'heatmap,boxes';

const byId = (id) => document.getElementById(id);
const ui = {
  layout: byId('layout'),
  controls: byId('controls'),
  keyPanel: byId('key-panel'),
  keyState: byId('key-state'),
  key: byId('api-key'),
  remember: byId('remember-key'),
  model: byId('model'),
  modelDescription: byId('model-description'),
  modelNews: byId('model-news'),
  failedModels: { note: byId('failed-models'), summary: byId('failed-summary'), list: byId('failed-list') },
  layer: byId('layer'),
  methods: byId('methods'),
  reportNote: byId('report-note'),
  classes: byId('classes'),
  classesField: byId('classes-field'),
  classesKind: byId('classes-kind'),
  detectorFields: byId('detector-fields'),
  scoreThreshold: byId('score-threshold'),
  scoreThresholdValue: byId('score-threshold-value'),
  maxDetections: byId('max-detections'),
  detectionPanel: byId('detection-panel'),
  detectionsNote: byId('detections-note'),
  detections: byId('detections'),
  segmentPanel: byId('segment-panel'),
  showMasks: byId('show-masks'),
  segmentLegend: byId('segment-legend'),
  alpha: byId('alpha'),
  alphaValue: byId('alpha-value'),
  colormap: byId('colormap'),
  boxes: byId('show-boxes'),
  threshold: byId('threshold'),
  dropZone: byId('drop-zone'),
  dropTitle: byId('drop-title'),
  fileInput: byId('file-input'),
  preview: byId('preview'),
  fileName: byId('file-name'),
  samples: byId('samples'),
  sampleList: byId('sample-list'),
  headline: byId('headline'),
  headlineLabel: byId('headline-label'),
  headlineProbability: byId('headline-probability'),
  headlineModel: byId('headline-model'),
  error: byId('error'),
  status: byId('status'),
  progress: byId('progress'),
  results: byId('results'),
  cardTemplate: byId('card-template'),
};
const classesHint = ui.classes.firstElementChild;

const state = {
  models: [], // GET /v1/models' `models`
  deadline: undefined, // GET /v1/models' `request_timeout_s`: the server's deadline in seconds
  colormaps: {}, // colormap name → lookup table
  appliedKey: '', // the key the models were last listed with
  modelsRequest: null, // AbortController of the models listing in progress
  modelsRetry: 0, // timer of the next listing while the server is still loading
  file: null, // the image being explained
  fileStem: 'image',
  decoded: null, // Promise of the browser's own decoding of `file` (null when it cannot)
  original: null, // the image's pixels (ImageData) at the size the server reported
  size: null, // {width, height} of the image as the server decoded it
  predictions: [], // the chosen model's top predictions for `file`
  explained: new Map(), // `${method}|${classIndex}` → {entry, heatmap}
  detector: new DetectorAnswers(), // a detector's detections and their maps
  selected: 0, // the index of the chosen detection
  headline: null, // {label, probability, note} shown large above the results
  segments: [], // a segmenter's `segments`, largest first
  masks: null, // ImageData of those segments' masks, coloured per class
  served: null, // {model, layer} of the latest answer
  cards: [],
  run: null, // AbortController of the update in progress
};

const progressBar = new ProgressBar(ui.progress);
const api = new Api(
  () => ui.key.value.trim(),
  (answer) => watch.noteVersion(answer.model, answer.model_version),
  (job, fraction) => progressBar.report(job, fraction),
);
const watch = new ModelWatch((signal) => api.models(signal), followModels);
const zoom = new Zoom(byId('zoom'));
const reports = new ReportWatch((name, signal) => api.report(name, signal), showModelReport);

start();

async function start() {
  ui.key.value = storedKey();
  ui.remember.checked = isRemembered();
  state.appliedKey = ui.key.value.trim();
  showKeyState();
  bindControls();
  watchImageInput({ dropZone: ui.dropZone, fileInput: ui.fileInput, onFile: (file) => chooseFile(file) });
  offerSamples();
  try {
    state.colormaps = await loadColormaps(COLORMAPS_URL);
    fillColormaps();
  } catch (error) {
    showError(error);
  }
  await loadModels();
}

function bindControls() {
  ui.controls.addEventListener('submit', (event) => {
    event.preventDefault();
    applyKey();
  });
  ui.key.addEventListener('change', applyKey);
  ui.remember.addEventListener('change', () => storeKey(ui.key.value.trim(), ui.remember.checked));
  ui.model.addEventListener('change', () => {
    fillModelControls();
    forgetPredictions();
    update();
  });
  ui.layer.addEventListener('change', () => {
    fillMethodChoices(currentModel());
    explainAnew();
  });
  ui.threshold.addEventListener('change', explainAnew);
  ui.scoreThreshold.addEventListener('input', showScoreThreshold);
  ui.scoreThreshold.addEventListener('change', update);
  ui.maxDetections.addEventListener('change', update);
  ui.showMasks.addEventListener('change', () => showMaskLayers(ui.results, ui.showMasks.checked));
  for (const group of [ui.methods, ui.classes]) {
    group.addEventListener('change', (event) => {
      keepOneChecked(group, event.target);
      update();
    });
  }
  ui.alpha.addEventListener('input', repaint);
  ui.colormap.addEventListener('change', repaint);
  ui.boxes.addEventListener('change', repaint);
}

/** Another layer or box threshold: every kept explanation is out of date. */
function explainAnew() {
  state.explained.clear();
  state.detector.reset();
  update();
}

// ---------------------------------------------------------------------------- API key, models

async function applyKey() {
  const key = ui.key.value.trim();
  storeKey(key, ui.remember.checked);
  showKeyState();
  if (key === state.appliedKey) return;
  state.appliedKey = key;
  await loadModels();
  update();
}

async function loadModels() {
  state.modelsRequest?.abort();
  clearTimeout(state.modelsRetry);
  const request = new AbortController();
  state.modelsRequest = request;
  try {
    const listing = await api.models(request.signal);
    takeListing(listing);
    watch.follow(listing);
    if (fillModels()) forgetPredictions();
    clearError();
    if (listing.models.length === 0) noModelsYet(listing.failed);
    else if (!state.file) setStatus('');
  } catch (error) {
    if (!request.signal.aborted) showError(error);
  }
}

/**
 * The server's models changed while the page was open: say what changed, keep the chosen model
 * and its controls when it is untouched, and explain the image again when it was reloaded or
 * removed (its kept explanations came from the version that is gone).
 */
function followModels(listing, changes) {
  const chosen = ui.model.value;
  takeListing(listing);
  const news = describeChanges(changes);
  if (news) {
    ui.modelNews.textContent = news;
    ui.modelNews.hidden = false;
  }
  const touched = !chosen || changes.removed.includes(chosen) || changes.reloaded.some(({ name }) => name === chosen);
  if (listing.models.length === 0) {
    fillModels();
    noModelsYet(listing.failed);
  } else if (touched) {
    fillModels();
    forgetPredictions();
    update();
  } else {
    fillModelOptions();
  }
}

/** Keep what GET /v1/models said: the models, the server's deadline, and the models that failed. */
function takeListing(listing) {
  state.models = listing.models;
  state.deadline = listing.request_timeout_s;
  showFailedModels(ui.failedModels, listing.failed);
}

/** The key panel stays folded until the server asks for a key; its summary says if one is set. */
function showKeyState() {
  ui.keyState.textContent = ui.key.value.trim() ? '(set)' : '(only if the server asks for one)';
}

/** The server refused the call for want of a (right) key: unfold the key field. */
function askForKey() {
  ui.keyState.textContent = '(this server needs one)';
  ui.keyPanel.open = true;
  ui.key.focus();
}

function noModelsYet(failed) {
  const reasons = Object.entries(failed).map(([name, why]) => `${name}: ${why}`);
  if (reasons.length > 0) {
    showError(new Error(`No model could be loaded. ${reasons.join('; ')}`));
    return;
  }
  setStatus('The server is still loading its models…');
  state.modelsRetry = setTimeout(loadModels, MODELS_RETRY_MS);
}

/** Fill the model list and its controls, keeping the chosen model if it is still served; true if it changed. */
function fillModels() {
  const changed = fillModelOptions();
  fillModelControls();
  return changed;
}

/** Fill the model list alone, keeping the chosen model if it is still served; true if it changed. */
function fillModelOptions() {
  const previous = ui.model.value;
  // The name alone, so that it fits the select; the architecture is the option's title.
  const options = state.models.map((model) => {
    const option = new Option(model.name, model.name);
    option.title = `${model.name} (${model.architecture})`;
    return option;
  });
  ui.model.replaceChildren(...options);
  if (state.models.some((model) => model.name === previous)) ui.model.value = previous;
  return ui.model.value !== previous;
}

function currentModel() {
  return state.models.find((model) => model.name === ui.model.value) ?? null;
}

/** The chosen model's task: 'classification', 'detection' or 'segmentation'. */
function currentTask() {
  return currentModel()?.task ?? 'classification';
}

function isDetector() {
  return currentTask() === 'detection';
}

function fillModelControls() {
  const model = currentModel();
  ui.modelDescription.textContent = model?.description ?? '';
  // A detector explains its detections, not its top classes: the score threshold and the
  // number of boxes replace the classes (top_k and predictions do not apply to it).
  ui.detectorFields.hidden = !isDetector();
  ui.classesField.hidden = isDetector();
  ui.classesKind.textContent = currentTask() === 'segmentation' ? '(largest by area)' : '(top predictions)';
  ui.layer.replaceChildren(...layerOptions(model));
  fillMethodChoices(model);
}

/**
 * The method checkboxes for `model` at the chosen layer, under the server's deadline, with the
 * badges of its explanation report.
 */
function fillMethodChoices(model) {
  fillMethods(ui.methods, model, chosenLayer(), model?.default_method ?? DEFAULT_METHOD, state.deadline);
  showModelReport(reports.follow(model));
}

/** The report `body` of the chosen model (null: none) beside its method checkboxes. */
function showModelReport(body) {
  showReport(ui.methods, ui.reportNote, body, chosenLayer());
}

/** The layer the next request explains: the chosen one, or the model's default. */
function chosenLayer() {
  return ui.layer.value || (currentModel()?.default_layer ?? '');
}

function layerOptions(model) {
  if (!model) return [];
  const others = model.candidate_layers.filter((layer) => layer !== model.default_layer);
  return [
    new Option(`${model.default_layer} (default)`, ''),
    ...others.map((layer) => new Option(layer, layer)),
  ];
}

function fillColormaps() {
  const names = Object.keys(state.colormaps);
  ui.colormap.replaceChildren(...names.map((name) => new Option(name, name)));
}

// ---------------------------------------------------------------------------- the image

/** Explain `file`; `sampleUrl` names the sample it is, if it is one. */
function chooseFile(file, sampleUrl = null) {
  state.file = file;
  state.fileStem = (file.name || 'image').replace(/\.[^.]*$/, '') || 'image';
  state.decoded = decodeImage(file).catch(() => null);
  state.original = null;
  state.size = null;
  showFile(file);
  // On a phone the results now come right under the image, the samples after them.
  ui.layout.classList.add('has-image');
  markChosenSample(ui.sampleList, sampleUrl);
  forgetPredictions();
  state.cards = [];
  ui.results.replaceChildren();
  update();
}

function showFile(file) {
  if (ui.preview.src) URL.revokeObjectURL(ui.preview.src);
  ui.preview.hidden = false;
  ui.preview.onerror = () => {
    ui.preview.hidden = true;
  };
  ui.preview.src = URL.createObjectURL(file);
  ui.fileName.textContent = file.name || 'pasted image';
  ui.dropTitle.textContent = 'Change image';
}

/** A button per sample image the server offers; each loads its sample as if it were chosen. */
async function offerSamples() {
  let samples = [];
  try {
    samples = await listSamples();
  } catch {
    return; // the samples are a convenience: without them the page works as before
  }
  showSamples(ui.sampleList, samples, chooseSample);
  ui.samples.hidden = samples.length === 0;
}

async function chooseSample(sample) {
  try {
    const file = await sampleFile(sample);
    useModelOf(sample);
    chooseFile(file, sample.url);
  } catch (error) {
    showError(error);
  }
}

/** A sample whose group is named after a served model (shapes-detector) is that model's:
 * choosing it chooses the model too. */
function useModelOf(sample) {
  const model = state.models.find((candidate) => candidate.name === sample.folder);
  if (!model || ui.model.value === model.name) return;
  ui.model.value = model.name;
  fillModelControls();
}

function forgetPredictions() {
  state.predictions = [];
  state.explained.clear();
  state.detector.reset();
  state.selected = 0;
  state.segments = [];
  state.masks = null;
  ui.detectionPanel.hidden = true;
  ui.segmentPanel.hidden = true;
  ui.classes.replaceChildren(classesHint);
  state.headline = null;
  ui.headline.hidden = true;
}

// ---------------------------------------------------------------------------- explaining

/** Ask for whatever the chosen classes and methods still lack, then show them. */
async function update() {
  if (!state.file) return;
  state.run?.abort();
  const run = new AbortController();
  state.run = run;
  clearError();
  setBusy(true);
  try {
    if (isDetector()) {
      await explainDetections(run.signal);
    } else {
      if (state.predictions.length === 0) await explainTopPrediction(run.signal);
      await explainChosen(run.signal);
    }
    state.original ??= await originalPixels(run.signal);
    render();
    setStatus(summary());
  } catch (error) {
    if (run.signal.aborted) return;
    setStatus('');
    hideResults();
    showError(error);
  } finally {
    if (state.run === run) {
      state.run = null;
      setBusy(false);
    }
  }
}

/**
 * The first request for an image: the top predictions, and the first class explained. A
 * segmenter's largest class is most often its background (class 0), so its two largest are
 * explained and the larger of those that is not the background comes first.
 */
async function explainTopPrediction(signal) {
  const segmenter = currentTask() === 'segmentation';
  const params = { ...requestParams(chosenMethods()), top_k: segmenter ? 2 : null };
  const response = await api.explain(state.file, params, signal);
  await keep(response, signal);
  state.size = { width: response.width, height: response.height };
  state.masks = response.segments ? await maskImage(response.segments, state.size) : null;
  throwIfAborted(signal);
  state.predictions = response.predictions;
  state.segments = response.segments ?? [];
  const first = firstClass(response);
  state.headline = classHeadline(response, first);
  ui.classes.replaceChildren(
    ...response.predictions.map((prediction) =>
      choice('class', String(prediction.index), prediction.label, prediction === first, percent(prediction.probability)),
    ),
  );
}

/** The class shown first: the top prediction; for a segmenter, its largest but the background. */
function firstClass(response) {
  const [top] = response.predictions;
  if (response.task !== 'segmentation') return top;
  return response.predictions.find((prediction) => !isBackground(prediction.index)) ?? top;
}

/** The class shown first as the headline, or null. */
function classHeadline(response, first) {
  if (!first) return null;
  const kind = response.task !== 'segmentation' ? 'top prediction' : 'largest class';
  const aside = response.task === 'segmentation' && isBackground(response.predictions[0].index);
  const note = `${kind}${aside ? ' (the background aside)' : ''} of ${response.model}`;
  return { label: first.label, probability: first.probability, note };
}

/** The headline, large, above the results (hidden when null). */
function showHeadline(headline) {
  ui.headline.hidden = !headline;
  if (!headline) return;
  ui.headlineLabel.textContent = headline.label;
  ui.headlineProbability.textContent = percent(headline.probability);
  ui.headlineModel.textContent = headline.note;
}

/** A detector's view: boxes above the score threshold, at most the chosen number. */
function detectorView() {
  return {
    threshold: Number(ui.scoreThreshold.value),
    cap: Number(ui.maxDetections.value),
    methods: chosenMethods(),
  };
}

function showScoreThreshold() {
  ui.scoreThresholdValue.textContent = Number(ui.scoreThreshold.value).toFixed(2);
}

/** The request a detector's view still needs, if any (see detector.js), and the chosen box. */
async function explainDetections(signal) {
  const view = detectorView();
  const request = state.detector.needed(view);
  if (request) {
    const params = {
      ...requestParams(request.methods),
      score_threshold: request.threshold,
      max_detections: request.cap,
    };
    const response = await api.explain(state.file, params, signal);
    const explained = await decodeExplanations(response, signal);
    state.detector.keep(request, response, explained);
    state.size = { width: response.width, height: response.height };
    state.served = { model: response.model, layer: response.layer };
  }
  const shown = state.detector.shown(view);
  if (!shown.some((detection) => detection.index === state.selected)) state.selected = shown[0]?.index ?? 0;
  const best = shown[0];
  const note = `best detection of ${state.served.model}`;
  state.headline = best ? { label: best.label, probability: best.score, note } : null;
}

/**
 * Whatever the chosen classes lack: one request for every missing method when those classes
 * are among the top predictions (top_k), otherwise one request per class.
 */
async function explainChosen(signal) {
  const methods = chosenMethods();
  let requests = missingExplanations(methods);
  if (requests.length === 0) return;
  const topK = topRanksCovering(requests.map(([classIndex]) => classIndex));
  if (topK !== null) {
    const missing = methods.filter((method) => requests.some(([, lacking]) => lacking.includes(method)));
    const params = { ...requestParams(missing), top_k: topK };
    await keep(await api.explain(state.file, params, signal), signal);
    // Classes with equal scores may rank differently in another pass: ask for those by name.
    requests = missingExplanations(methods);
  }
  await Promise.all(
    requests.map(async ([classIndex, missing]) => {
      const params = { ...requestParams(missing), target: classIndex };
      await keep(await api.explain(state.file, params, signal), signal);
    }),
  );
}

/** [class, methods it still lacks] for each chosen class that lacks some of `methods`. */
function missingExplanations(methods) {
  return chosenClasses()
    .map((classIndex) => [classIndex, methods.filter((method) => !isExplained(method, classIndex))])
    .filter(([, missing]) => missing.length > 0);
}

/** The k whose top-k predictions include every one of `classes`, or null if one is not there. */
function topRanksCovering(classes) {
  const ranks = classes.map((classIndex) =>
    state.predictions.findIndex((prediction) => String(prediction.index) === String(classIndex)),
  );
  return ranks.some((rank) => rank < 0) ? null : Math.max(...ranks) + 1;
}

/** The query of every /v1/explain request the page sends. */
function requestParams(methods) {
  return {
    model: ui.model.value,
    layer: ui.layer.value,
    method: methods.join(','),
    alpha: ui.alpha.value,
    colormap: ui.colormap.value,
    include: INCLUDE,
    predictions: isDetector() ? null : PREDICTIONS,
    threshold: ui.threshold.value,
  };
}

/** Decode and keep every explanation of `response`, unless a newer update has started. */
async function keep(response, signal) {
  const decoded = await decodeExplanations(response, signal);
  for (const explained of decoded) {
    const { method, class_index: classIndex, class_agnostic: agnostic } = explained.entry;
    state.explained.set(explainedKey(method, agnostic ? ANY_CLASS : classIndex), explained);
  }
  state.served = { model: response.model, layer: response.layer };
}

/** Every explanation of `response` as {entry, heatmap}, its heatmap decoded. */
async function decodeExplanations(response, signal) {
  const decoded = await Promise.all(
    response.explanations.map(async (entry) => ({ entry, heatmap: await decodeHeatmap(entry.heatmap) })),
  );
  throwIfAborted(signal);
  return decoded;
}

/**
 * The image's pixels as the server sees them: the browser's decoding when it has the server's
 * size; otherwise (a format the browser cannot read, such as TIFF) the server's own decoding,
 * which /v1/cam returns as an overlay at opacity 0.
 */
async function originalPixels(signal) {
  const decoded = await state.decoded;
  throwIfAborted(signal);
  const { width, height } = state.size;
  if (decoded && decoded.width === width && decoded.height === height) return decoded;
  const params = { model: ui.model.value, layer: ui.layer.value, alpha: 0, format: 'png' };
  // A detector's overlay draws its best box; above a score of 1 it finds none and sends the image.
  if (isDetector()) params.score_threshold = 1;
  const pixels = await decodeImage(await api.overlay(state.file, params, signal));
  throwIfAborted(signal);
  return pixels;
}

function throwIfAborted(signal) {
  if (signal.aborted) throw new DOMException('a newer update started', 'AbortError');
}

function explainedKey(method, classIndex) {
  return `${method}|${classIndex}`;
}

/** A class-agnostic map (Eigen-CAM) comes once and stands for every class. */
const ANY_CLASS = '*';

function explainedFor(method, classIndex) {
  return (
    state.explained.get(explainedKey(method, classIndex)) ?? state.explained.get(explainedKey(method, ANY_CLASS))
  );
}

function isClassAgnostic(method) {
  return state.explained.has(explainedKey(method, ANY_CLASS));
}

function isExplained(method, classIndex) {
  return explainedFor(method, classIndex) !== undefined;
}

// ---------------------------------------------------------------------------- showing

/**
 * One card per chosen class and method: a grid with a row per class, a column per method. A
 * class-agnostic method (Eigen-CAM: one map for the image, whatever the class) has one card,
 * in the first row, spanning every row of its column.
 */
function render() {
  showHeadline(state.headline);
  if (isDetector()) renderDetections();
  else renderClasses();
  showSegments();
  repaint();
}

function renderClasses() {
  const methods = chosenMethods();
  const shared = new Set(methods.flatMap((method, column) => (isClassAgnostic(method) ? [column] : [])));
  const rows = chosenClasses().map((classIndex, rank) => ({
    prediction: state.predictions.find((candidate) => candidate.index === classIndex),
    cards: methods.map((method, column) => {
      if (shared.has(column) && rank > 0) return undefined; // the first row's card spans it
      const explained = explainedFor(method, classIndex);
      return explained ? new ExplanationCard(ui.cardTemplate, explained, state.fileStem, enlarge) : null;
    }),
  }));
  state.cards = rows.flatMap((row) => row.cards).filter(Boolean);
  const grid = new ResultsGrid(methods.map(methodName), rows, shared);
  ui.results.replaceChildren(state.cards.length > 1 ? grid.element : (state.cards[0]?.element ?? ''));
  ui.results.classList.toggle('several', state.cards.length > 1);
}

/** A detector: one card per method for the chosen detection, every drawn box over each. */
function renderDetections() {
  const view = detectorView();
  const shown = state.detector.shown(view);
  const selected = shown.find((detection) => detection.index === state.selected);
  const maps = selected ? view.methods.map((method) => state.detector.namedMap(method, selected)) : [];
  state.cards = maps.filter(Boolean).map((explained) => {
    const card = new ExplanationCard(ui.cardTemplate, explained, state.fileStem, enlarge);
    drawDetections(stageOf(card, state.size), shown, state.size, state.selected, selectDetection);
    return card;
  });
  ui.results.replaceChildren(...state.cards.map((card) => card.element));
  ui.results.classList.remove('several');
  ui.detectionPanel.hidden = false;
  ui.detectionsNote.textContent = state.detector.note(view);
  listDetections(ui.detections, shown, state.selected, selectDetection);
}

/** Show detection `index`'s maps: they are kept, so no request. */
function selectDetection(index) {
  if (index === state.selected) return;
  state.selected = index;
  if (state.run) return; // the update in progress draws the new choice when it ends
  const fromList = ui.detections.contains(document.activeElement);
  render();
  const button = ui.detections.querySelector(`[data-index="${index}"]`);
  if (fromList) button?.focus({ preventScroll: true });
}

/** A segmenter: its masks as a layer over each card, and the legend of their classes. */
function showSegments() {
  ui.segmentPanel.hidden = !state.masks;
  if (!state.masks) return;
  showLegend(ui.segmentLegend, state.segments);
  for (const card of state.cards) addMaskLayer(stageOf(card, state.size), state.masks, ui.showMasks.checked);
}

/** Show one card large, beside the original image. */
function enlarge(card) {
  zoom.show(card, state.original);
}

/** Blend every card again from the kept heatmaps: no request. */
function repaint() {
  const alpha = Number(ui.alpha.value);
  ui.alphaValue.textContent = alpha.toFixed(2);
  const lut = state.colormaps[ui.colormap.value];
  if (!state.original || !lut) return;
  const view = { original: state.original, lut, alpha, boxes: ui.boxes.checked };
  for (const card of state.cards) card.paint(view);
}

function summary() {
  const count = state.cards.length;
  if (!state.served) return '';
  const { model, layer } = state.served;
  return `${count} ${count === 1 ? 'heatmap' : 'heatmaps'} from ${model}, layer ${layer}.`;
}

/**
 * A failed request: take the results off the page, so that none stands under the error as if
 * it answered the request that failed. What was kept stays: undoing the change shows it again.
 */
function hideResults() {
  state.cards = [];
  ui.results.replaceChildren();
  ui.results.classList.remove('several');
  ui.headline.hidden = true;
  ui.detectionPanel.hidden = true;
  ui.segmentPanel.hidden = true;
}

function setBusy(busy) {
  ui.results.setAttribute('aria-busy', String(busy));
  progressBar.clear();
  if (busy) setStatus('Explaining…');
}

function setStatus(text) {
  ui.status.textContent = text;
}

function showError(error) {
  ui.error.textContent = error.message;
  ui.error.dataset.code = error.code ?? '';
  if (error.status === 401) askForKey();
}

function clearError() {
  ui.error.textContent = '';
  delete ui.error.dataset.code;
}

// ---------------------------------------------------------------------------- chosen values

function chosenMethods() {
  return checkedValues(ui.methods);
}

function chosenClasses() {
  return checkedValues(ui.classes).map(Number);
}
