// The progress bar of the long requests (Score-CAM): each runs as a job on the server, whose
// progress (the share of its masked passes done) the page follows; the bar shows the mean of the
// jobs under way, as a progressbar for assistive technology too.

export class ProgressBar {
  /** `element` is the bar (role=progressbar), holding one `.progress-fill`. */
  constructor(element) {
    this.element = element;
    this.fill = element.querySelector('.progress-fill');
    this.jobs = new Map();
  }

  /** Job `job`'s fraction done (0 to 1). */
  report(job, fraction) {
    this.jobs.set(job, fraction);
    const fractions = [...this.jobs.values()];
    const mean = fractions.reduce((sum, value) => sum + value, 0) / fractions.length;
    const percent = Math.round(100 * mean);
    this.element.hidden = false;
    this.element.setAttribute('aria-valuenow', String(percent));
    this.element.setAttribute('aria-valuetext', `Score-CAM ${percent}% done`);
    this.fill.style.width = `${percent}%`;
  }

  /** No job under way: the bar goes, back at zero. */
  clear() {
    this.jobs.clear();
    this.element.hidden = true;
    this.element.setAttribute('aria-valuenow', '0');
    this.element.removeAttribute('aria-valuetext');
    this.fill.style.width = '0%';
  }
}
