// The console's few scripts: times in the viewer's zone, the weekly chart, the
// audit's progress, copying the head. Pages work without them (times then
// read in UTC); each piece runs only where its element is.
"use strict";

(function localTimes() {
  // to the second, in the viewer's own zone and way of writing a date; the
  // UTC value stays in datetime and the exact recorded one in title
  const format = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  });
  for (const time of document.querySelectorAll("time[datetime]")) {
    const when = new Date(time.getAttribute("datetime"));
    if (!Number.isNaN(when.getTime())) time.textContent = format.format(when);
  }
})();

(function weeklyChart() {
  const data = document.getElementById("weekly-data");
  const canvas = document.getElementById("weekly-chart");
  if (!data || !canvas || typeof Chart === "undefined") return;
  const weeks = JSON.parse(data.textContent);
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: weeks.map((w) => w.week),
      datasets: [
        { label: "re-fetched after expiry", data: weeks.map((w) => w.reverified_after_expiry), backgroundColor: "#1f5fa8" },
        { label: "blocked by revocation", data: weeks.map((w) => w.blocked_by_revocation), backgroundColor: "#b3261e" },
      ],
    },
    options: { responsive: true, maintainAspectRatio: false, animation: false, scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
  });
  canvas.dataset.ready = "yes";
})();

(function auditVerify() {
  const form = document.getElementById("verify-form");
  if (!form) return;
  const bar = document.getElementById("verify-progress");
  const result = document.getElementById("verify-result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.textContent = "checking…";
    const started = await fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" });
    if (!started.ok) { result.textContent = "could not start the check (" + started.status + ")"; return; }
    const { job } = await started.json();
    for (;;) {
      const answer = await fetch("/console/audit/verify/" + job, { credentials: "same-origin" });
      const state = await answer.json();
      bar.max = Math.max(state.total, 1);
      bar.value = state.checked;
      if (state.done) {
        const r = state.report;
        result.textContent = r.ok
          ? "ok: " + r.checked.toLocaleString("en") + " events, head seq " + r.head_seq + " — the chain is intact"
          : "DAMAGED" + (r.first_bad_seq != null ? " at seq " + r.first_bad_seq : "") + ": " + r.problem;
        result.className = r.ok ? "ok" : "alert";
        return;
      }
      await new Promise((done) => setTimeout(done, 200));
    }
  });
})();

(function copyButtons() {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      const said = document.getElementById("copy-done");
      try {
        await navigator.clipboard.writeText(text);
        said.textContent = "copied";
      } catch {
        said.textContent = "select the line and copy it";
      }
    });
  }
})();
