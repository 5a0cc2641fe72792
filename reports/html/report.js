// report.html's script (inlined after Chart.js by reports/CMakeLists.txt): draws every
// <figure class="plot"> from its entry in the JSON block #plot-data, and adds a Copy button
// beside every replay command. The page is complete without it: every number a plot shows is
// in a static table. Plot types: ratio-distribution, assert-close, profile, kill-matrix,
// kill-cases, series (reports/html_page.hpp, docs/reports.md).
(function () {
  'use strict';
  var TEXT = '#1a1a1a';
  // Bound-ratio bins 0..8 (engine/collector.hpp): exact grey, passing bins a sequential blue
  // (light: far below the bound), failing bins vermillion and dark red.
  var BIN_COLOURS = ['#bdbdbd', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#3182bd',
    '#08519c', '#e6550d', '#7f0000'];
  var FALSE_ALARM = '#e69f00';
  var MISSED = '#d55e00';

  Chart.defaults.animation = false;
  Chart.defaults.color = TEXT;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.family = 'system-ui, "DejaVu Sans", sans-serif';

  function rowTotals(counts) {
    return counts.map(function (row) { return row.reduce(function (a, b) { return a + b; }, 0); });
  }

  function ratioDistribution(canvas, spec) {
    var totals = rowTotals(spec.counts);
    var datasets = spec.bins.map(function (label, b) {
      return {
        label: 'ratio ' + label,
        backgroundColor: BIN_COLOURS[b],
        data: spec.counts.map(function (row, r) { return totals[r] ? 100 * row[b] / totals[r] : 0; }),
        counts: spec.counts.map(function (row) { return row[b]; })
      };
    });
    return new Chart(canvas, {
      type: 'bar',
      data: { labels: spec.rows, datasets: datasets },
      options: {
        indexAxis: 'y',
        scales: { x: { stacked: true, max: 100, title: { display: true, text: '% of tensor checks' } },
          y: { stacked: true } },
        plugins: { tooltip: { callbacks: { label: function (c) {
          return c.dataset.label + ': ' + c.dataset.counts[c.dataIndex] + ' checks';
        } } } }
      }
    });
  }

  function assertClose(canvas, spec) {
    return new Chart(canvas, {
      type: 'bar',
      data: { labels: spec.rows, datasets: [
        { label: 'false alarms (bound passes, assert_close fails)', backgroundColor: FALSE_ALARM,
          data: spec.false_alarms },
        { label: 'misses (bound fails, assert_close passes)', backgroundColor: MISSED,
          data: spec.missed }] },
      options: { indexAxis: 'y',
        scales: { x: { beginAtZero: true, suggestedMax: 1, title: { display: true,
          text: 'tensor checks (of ' + Math.max.apply(null, spec.cases) + ' at most per row)' } } } }
    });
  }

  // Vertical lines at the rank boundaries (element offsets along the axis) and the bound.
  function boundaryPlugin(boundaries) {
    return { id: 'boundaries', afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx, x = chart.scales.x, y = chart.scales.y, area = chart.chartArea;
      ctx.save();
      ctx.strokeStyle = '#7a0177';
      ctx.setLineDash([5, 4]);
      boundaries.forEach(function (b) {
        var px = x.getPixelForValue(b - 0.5);
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
      });
      if (y.max >= 1) {
        ctx.strokeStyle = '#a40000';
        var py = y.getPixelForValue(1);
        ctx.beginPath(); ctx.moveTo(area.left, py); ctx.lineTo(area.right, py); ctx.stroke();
      }
      ctx.restore();
    } };
  }

  function profileLine(canvas, spec) {
    var points = [], errors = [];
    for (var i = 0; i < spec.rows; i++) {
      points.push({ x: i * spec.row_block, y: spec.ratio[i] === null ? 1e3 : spec.ratio[i] });
      errors.push(spec.error[i]);
    }
    return new Chart(canvas, {
      type: 'line',
      data: { datasets: [{ label: 'err / bound', data: points, borderColor: '#08519c',
        backgroundColor: '#08519c', pointRadius: spec.rows > 200 ? 0 : 2, borderWidth: 1.5 }] },
      options: {
        parsing: false,
        scales: { x: { type: 'linear', min: -0.5, max: spec.length - 0.5,
          ticks: { callback: function (v) { return Number.isInteger(v) ? v : ''; } },
          title: { display: true,
          text: 'index along ' + (spec.axis < 0 ? 'dimension 0' : 'dimension ' + spec.axis) +
            ' (dashed: rank boundaries)' } },
          y: { beginAtZero: true, title: { display: true, text: 'err / bound (red: the bound)' } } },
        plugins: { tooltip: { callbacks: { label: function (c) {
          return 'ratio ' + c.parsed.y.toPrecision(3) + ', error ' + errors[c.dataIndex];
        } } } }
      },
      plugins: [boundaryPlugin(spec.boundaries)]
    });
  }

  // A canvas sized to its box, in device pixels; returns its 2-D context in CSS pixels.
  function sized(canvas) {
    var box = canvas.parentNode, dpr = window.devicePixelRatio || 1;
    canvas.width = box.clientWidth * dpr;
    canvas.height = box.clientHeight * dpr;
    canvas.style.width = box.clientWidth + 'px';
    canvas.style.height = box.clientHeight + 'px';
    var ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(0, 0, box.clientWidth, box.clientHeight);
    ctx.font = '12px system-ui, "DejaVu Sans", sans-serif';
    return { ctx: ctx, w: box.clientWidth, h: box.clientHeight };
  }

  // err/bound -> colour: 0 white; (0, 1] a blue ramp on log10 from 1e-4; > 1 red; NaN/Inf black.
  function ratioColour(r) {
    if (r === null) return '#000000';
    if (r > 1) return r > 10 ? '#7f0000' : '#e6550d';
    if (r <= 0) return '#ffffff';
    var t = Math.min(1, Math.max(0, (Math.log10(r) + 4) / 4));
    var light = [222, 235, 247], dark = [8, 48, 107];
    var c = light.map(function (l, k) { return Math.round(l + t * (dark[k] - l)); });
    return 'rgb(' + c.join(',') + ')';
  }

  function profileHeatmap(canvas, spec) {
    var s = sized(canvas), ctx = s.ctx;
    var left = 48, top = 10, right = 120, bottom = 40;
    var cw = (s.w - left - right) / spec.rows, ch = (s.h - top - bottom) / spec.cols;
    for (var i = 0; i < spec.rows; i++) {
      for (var j = 0; j < spec.cols; j++) {
        ctx.fillStyle = ratioColour(spec.ratio[i * spec.cols + j]);
        ctx.fillRect(left + i * cw, top + j * ch, Math.ceil(cw), Math.ceil(ch));
      }
    }
    ctx.strokeStyle = '#7a0177';
    ctx.lineWidth = 2;
    ctx.setLineDash([5, 4]);
    spec.boundaries.forEach(function (b) {
      var px = left + (b / spec.row_block) * cw;
      ctx.beginPath(); ctx.moveTo(px, top); ctx.lineTo(px, s.h - bottom); ctx.stroke();
    });
    ctx.setLineDash([]);
    ctx.strokeStyle = '#8c959f';
    ctx.lineWidth = 1;
    ctx.strokeRect(left, top, s.w - left - right, s.h - top - bottom);
    ctx.fillStyle = TEXT;
    ctx.fillText('index along ' + (spec.axis < 0 ? 'dimension 0' : 'dimension ' + spec.axis) +
      ' (0 .. ' + (spec.length - 1) + '; dashed: rank boundaries)', left, s.h - 14);
    ctx.save(); ctx.translate(14, s.h - bottom); ctx.rotate(-Math.PI / 2);
    ctx.fillText('other dims (0 .. ' + (spec.rest - 1) + ')', 0, 0); ctx.restore();
    var legend = [[0, '0'], [1e-4, '1e-4'], [1e-2, '1e-2'], [1, '1 (bound)'], [5, '(1, 10]'],
      [20, '> 10'], [null, 'NaN/Inf']];
    legend.forEach(function (e, k) {
      var y = top + k * 20, x = s.w - right + 12;
      ctx.fillStyle = ratioColour(e[0]); ctx.fillRect(x, y, 14, 14);
      ctx.strokeStyle = '#8c959f'; ctx.strokeRect(x, y, 14, 14);
      ctx.fillStyle = TEXT; ctx.fillText(e[1], x + 20, y + 11);
    });
    return null;
  }

  function profile(canvas, spec) {
    return spec.cols > 1 ? profileHeatmap(canvas, spec) : profileLine(canvas, spec);
  }

  // Cells: > 0 cases to kill (green, darker = fewer), 0 passed, -1 not run, -2 n/a.
  function killMatrix(canvas, spec) {
    var s = sized(canvas), ctx = s.ctx;
    var left = 12 + Math.max.apply(null, spec.rows.map(function (r) { return ctx.measureText(r).width; }));
    // Column labels at 45 degrees: room above and to the right for the longest.
    var slant = 0.71 * Math.max.apply(null, spec.cols.map(function (c) { return ctx.measureText(c).width; }));
    var top = 14 + slant, right = 10 + slant, bottom = 8;
    var cw = (s.w - left - right) / spec.cols.length, ch = (s.h - top - bottom) / spec.rows.length;
    var most = 1;
    spec.cells.forEach(function (row) { row.forEach(function (v) { most = Math.max(most, v); }); });
    ctx.textBaseline = 'middle';
    spec.rows.forEach(function (name, i) {
      ctx.fillStyle = TEXT; ctx.textAlign = 'right';
      ctx.fillText(name, left - 6, top + (i + 0.5) * ch);
      spec.cells[i].forEach(function (v, j) {
        var t = v > 0 ? Math.log(v) / Math.log(most + 1) : 0;
        ctx.fillStyle = v > 0 ? 'rgb(' + [0, Math.round(90 + 100 * t), Math.round(50 + 60 * t)] + ')'
          : v === 0 ? '#f0f0f0' : v === -1 ? '#ffffff' : '#d9d9d9';
        ctx.fillRect(left + j * cw, top + i * ch, cw, ch);
        ctx.strokeStyle = '#8c959f'; ctx.strokeRect(left + j * cw, top + i * ch, cw, ch);
        ctx.fillStyle = v > 0 ? '#ffffff' : TEXT; ctx.textAlign = 'center';
        ctx.fillText(v > 0 ? String(v) : v === 0 ? 'passed' : v === -1 ? '' : 'n/a',
          left + (j + 0.5) * cw, top + (i + 0.5) * ch);
      });
    });
    spec.cols.forEach(function (name, j) {
      ctx.save(); ctx.translate(left + (j + 0.5) * cw, top - 6); ctx.rotate(-Math.PI / 4);
      ctx.fillStyle = TEXT; ctx.textAlign = 'left'; ctx.fillText(name, 0, 0); ctx.restore();
    });
    return null;
  }

  function killCases(canvas, spec) {
    return new Chart(canvas, {
      type: 'bar',
      data: { labels: spec.rows, datasets: [{ label: 'cases to kill', backgroundColor: '#006d2c',
        data: spec.cases.map(function (n) { return n > 0 ? n : null; }) }] },
      options: { indexAxis: 'y', scales: { x: { type: 'logarithmic', min: 1,
        title: { display: true, text: 'cases (log scale); none: survived' } } } }
    });
  }

  // Okabe-Ito's colour-blind-safe palette (black last).
  var SERIES_COLOURS = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9',
    '#f0e442', '#000000'];

  // One line per series over the x labels (the nightly summary: a value per night; null: not
  // measured that night). spec: {x: [labels], series: [{name, values}], y_title, log}.
  function series(canvas, spec) {
    return new Chart(canvas, {
      type: 'line',
      data: { labels: spec.x, datasets: spec.series.map(function (s, k) {
        var c = SERIES_COLOURS[k % SERIES_COLOURS.length];
        return { label: s.name, data: s.values, borderColor: c, backgroundColor: c,
          pointRadius: 3, borderWidth: 1.5, spanGaps: true };
      }) },
      options: { scales: {
        x: { title: { display: true, text: spec.x_title || '' } },
        y: { type: spec.log ? 'logarithmic' : 'linear', beginAtZero: !spec.log,
          title: { display: true, text: spec.y_title || '' } } } }
    });
  }

  var DRAW = { 'ratio-distribution': ratioDistribution, 'assert-close': assertClose,
    'profile': profile, 'kill-matrix': killMatrix, 'kill-cases': killCases, 'series': series };

  var data = JSON.parse(document.getElementById('plot-data').textContent);
  Array.prototype.forEach.call(document.querySelectorAll('figure.plot'), function (fig) {
    var spec = data[fig.id];
    if (!spec) return;  // nothing to draw: the browser test reports the blank figure
    var draw = DRAW[spec.type];
    if (!draw) throw new Error('report.js: no drawing for plot type ' + spec.type);
    draw(fig.querySelector('canvas'), spec);
    fig.setAttribute('data-drawn', spec.type);
  });

  function copy(text, button) {
    var done = function () { button.textContent = 'Copied'; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { button.textContent = 'Select and copy'; });
    } else {
      var range = document.createRange();
      range.selectNodeContents(button.previousSibling);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
      button.textContent = document.execCommand('copy') ? 'Copied' : 'Selected: press Ctrl+C';
    }
  }
  Array.prototype.forEach.call(document.querySelectorAll('code.replay'), function (code) {
    var b = document.createElement('button');
    b.type = 'button';
    b.className = 'copy';
    b.textContent = 'Copy';
    b.setAttribute('aria-label', 'Copy the replay command');
    b.addEventListener('click', function () { copy(code.textContent, b); });
    code.parentNode.insertBefore(b, code.nextSibling);
  });
}());
