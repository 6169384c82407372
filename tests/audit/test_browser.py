"""A real browser (Debian's headless Chromium through Selenium and chromedriver) completes a
study with the keyboard, closing and reopening the browser mid-study; the collected CSVs equal the
keys pressed, and the report shows Tables 11, 20 and 21 from them."""

from __future__ import annotations

import csv
import os
import shutil
import urllib.request
from collections import Counter

import pyarrow.parquet as pq
import pytest

from autocomp.analysis.report import report_stage
from autocomp.audit.collect import collect_stage
from autocomp.audit.judge import judge_stage
from autocomp.audit.study import Study
from tests.audit.conftest import tokens, write_run
from tests.audit.test_agreement_judge import judge_folders

pytestmark = pytest.mark.slow


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if browser is None or driver_path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium and chromium-driver")
        pytest.skip("chromium / chromedriver are not installed here")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_path), options=options)


def _answer_current(driver, rule):
    """Read the page, press the key(s) for the option `rule` picks, wait for the next page;
    returns (item position, chosen option text)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    url = driver.current_url
    position = int(url.rsplit("/", 1)[1])
    form = driver.find_element(By.ID, "answer")
    texts = [b.text.split(" ", 1)[1] for b in form.find_elements(By.CSS_SELECTOR, "button.option")]
    choice = rule(position, len(texts))
    body = driver.find_element(By.TAG_NAME, "body")
    if form.get_attribute("data-kind") == "yesno":
        body.send_keys("y" if choice == 0 else "n")
    elif len(texts) <= 9:
        body.send_keys(str(choice + 1))
    else:
        body.send_keys(str(choice + 1))
        assert driver.find_element(By.ID, "typed").text == str(choice + 1)
        body.send_keys(Keys.ENTER)
    WebDriverWait(driver, 10).until(
        lambda d: (
            d.current_url != url and d.execute_script("return document.readyState") == "complete"
        )
    )
    return position, texts[choice]


def _first_rule(position, size):
    return (position * 7 + 3) % size


def test_a_browser_completes_the_study(demo_study, demo_server, tmp_path, bench_root, published):
    """The study of the published tiny benchmark (the demo's format: images embedded)."""
    study, server = demo_study, demo_server
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    link = f"{server}/a/{tokens(study)['V1']}/"
    total = len(Study(study).items["V1"])
    clicks: dict[int, str] = {}
    driver = _driver()
    try:
        driver.get(link)
        assert driver.current_url.endswith("/item/0")
        for _ in range(total // 2):
            position, text = _answer_current(driver, _first_rule)
            clicks[position] = text
        driver.refresh()  # a reload shows the same open item
        assert driver.current_url.endswith(f"/item/{total // 2}")
        driver.save_screenshot(str(tmp_path / "item.png"))
    finally:
        driver.quit()  # close the browser mid-study
    driver = _driver()
    try:
        driver.get(link)  # resumes at the first open item
        assert driver.current_url.endswith(f"/item/{total // 2}")
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)  # go back...
        WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith(f"/{total // 2 - 1}"))
        chosen = driver.find_elements(By.CSS_SELECTOR, "button.chosen")
        assert [c.text.split(" ", 1)[1] for c in chosen] == [clicks[total // 2 - 1]]
        position, text = _answer_current(driver, lambda p, n: (_first_rule(p, n) + 1) % n)
        clicks[position] = text  # ...and change that answer: the last one counts
        while "/item/" in driver.current_url:
            position, text = _answer_current(driver, _first_rule)
            clicks[position] = text
        assert driver.current_url.endswith("/done")
        assert "All items are answered" in driver.find_element(By.TAG_NAME, "body").text
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert logs == []  # no script errors, no CSP violations
    finally:
        driver.quit()
    assert sorted(clicks) == list(range(total))

    # two more annotators answer over plain HTTP: V2 like V1, V3 always the first option
    items = Study(study).items
    for name, rule in (("V2", _first_rule), ("V3", lambda p, n: 0)):
        for position, item in enumerate(items[name]):
            data = f"answer={rule(position, len(item['options']))}".encode()
            request = urllib.request.Request(
                f"{server}/a/{tokens(study)[name]}/item/{position}", data=data, method="POST"
            )
            with urllib.request.urlopen(request) as response:
                assert response.status == 200

    run = write_run(bench_root, tmp_path / "run", published)
    summary = collect_stage(study, run / "human")
    assert summary["V1"]["answered"] == summary["V1"]["items"] == total
    assert summary["V1"]["open"] == 0 and summary["V1"]["complete"]

    # the collected CSV equals the keys pressed
    key = {k["key"]: k for k in pq.read_table(study / "key.parquet").to_pylist()}
    expected, validity = Counter(), {}
    for position, text in clicks.items():
        k = key[items["V1"][position]["key"]]
        if k["task"] == "valid":
            validity.setdefault(k["sample_id"], []).append(text)
        else:
            expected[("V1", k["sample_id"], k["task"], text)] += 1
    for sample, said in validity.items():
        expected[("V1", sample, "valid", "yes" if set(said) == {"yes"} else "no")] += 1
    with (run / "human" / "V1.csv").open(newline="") as f:
        got = Counter(tuple(r.values()) for r in csv.DictReader(f))
    assert got == expected
    with (run / "human" / "questions" / "V1.csv").open(newline="") as f:
        assert sum(1 for _ in csv.DictReader(f)) == sum(len(v) for v in validity.values())

    # the report shows Tables 11, 20 and 21 from the study and the second judge
    ours, theirs = judge_folders(bench_root, tmp_path)
    judge_stage([ours, theirs], run / "judges")
    done = report_stage(run, tmp_path / "report")
    page = done["html"].read_text()
    for heading in ("Human validation (Tables 11, 20)", "Per-annotator raw scores (Table 20)",
                    "Inter-annotator agreement (Fleiss&#x27; kappa)", "(Table 21)"):  # fmt: skip
        assert heading in page, heading
    tables = tmp_path / "report" / "tables"
    per_annotator = pq.read_table(tables / "human_per_annotator.parquet").to_pylist()
    assert {r["annotator"] for r in per_annotator} == {"V1", "V2", "V3"}
    v3 = [r for r in per_annotator if r["annotator"] == "V3"]
    assert sum(r["swap_items"] for r in v3) == 12  # 6 concepts x 2 conditions
    kappa = pq.read_table(tables / "human_agreement.parquet").to_pylist()
    assert {r["annotators"] for r in kappa} == {3}
    assert all(r["items_dropped"] == 0 for r in kappa)
