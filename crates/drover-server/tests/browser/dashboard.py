#!/usr/bin/env python3
"""Drives drover's dashboard in Debian's headless Chromium (chromedriver,
PyPI selenium): one scenario per run, for crates/drover-server/tests/
dashboard_browser.rs, which starts the cluster and reads what this prints.

Usage: dashboard.py SCENARIO, with the environment:
  DASH_URL      https://HOST:PORT of a member's HTTP port
  DASH_COOKIE   name=value of a session cookie (scenarios after sign-in)
  DASH_TOKEN, DASH_METRICS_TOKEN   (signin)
  DASH_PATH     the page to open
  DASH_NODE     a node's name (viewer, red)
  DASH_NODES    the grid's cells when all are updated (rollout)
  DASH_SHOT_PREFIX  the rollout's screenshots (dashboard-daemonset)
  DASH_SHOTS    a folder for screenshots (optional)

Protocol: "READY" on stdout when the page is open and watched; the test
answers "GO" on stdin once it changed the cluster; "RESULT k=v" lines;
exit status 0 when the scenario's checks held, 1 with the reason on stderr.
"""

import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import WebDriverException

URL = os.environ["DASH_URL"].rstrip("/")
SHOTS = os.environ.get("DASH_SHOTS")


DRIVER = None


def fail(why):
    if DRIVER is not None:
        why += f"\nat {DRIVER.current_url}:\n{DRIVER.page_source[-1500:]}"
    print(why, file=sys.stderr, flush=True)
    sys.exit(1)


def say(line):
    print(line, flush=True)


def browser(width=1280, height=900):
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              "--disable-gpu", f"--window-size={width},{height}"):
        o.add_argument(a)
    # The member's certificate is signed by the cluster's own CA.
    o.accept_insecure_certs = True
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


def shot(d, name):
    if SHOTS:
        d.save_screenshot(os.path.join(SHOTS, name))


def with_session(d):
    """Sets the session cookie of DASH_COOKIE in the browser."""
    name, value = os.environ["DASH_COOKIE"].split("=", 1)
    d.get(URL + "/ui/login")
    d.add_cookie({"name": name, "value": value, "path": "/ui", "secure": True,
                  "httpOnly": True, "sameSite": "Strict"})


def wait(what, cond, within=20.0, every=0.02):
    end = time.monotonic() + within
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(every)
    fail(f"timed out waiting for {what}")


def new_page_refusal(d):
    """The refusal's reason on the page that replaced the marked one;
    None while the old page is still there or the new one is loading."""
    try:
        return d.execute_script("""
            if (document.documentElement.dataset.before) return null;
            const e = document.getElementById('login-error');
            return e ? e.dataset.reason : null;""")
    except WebDriverException:
        return None


def signin(d):
    d.get(URL + "/ui")
    wait("the sign-in form", lambda: "/ui/login" in d.current_url)
    for token, reason in ((os.environ["DASH_METRICS_TOKEN"], "MetricsCredential"),
                          ("drover-admin-wrong", "WrongToken")):
        d.find_element(By.ID, "token").send_keys(token)
        # The form posts and the answer is a new document: mark this one,
        # so the refusal read is the new page's, never the one before it
        # (whose error element goes stale under the reader).
        d.execute_script("document.documentElement.dataset.before = '1'")
        d.find_element(By.CSS_SELECTOR, "#token-form button").click()
        got = wait("the refusal", lambda: new_page_refusal(d))
        if got != reason:
            fail(f"refused with {got}, not {reason}")
        if d.get_cookie("drover_session"):
            fail(f"a refused sign-in ({reason}) set a session cookie")
        say(f"RESULT refused={reason}")
    shot(d, "dashboard-login.png")
    d.find_element(By.ID, "token").send_keys(os.environ["DASH_TOKEN"])
    d.find_element(By.CSS_SELECTOR, "#token-form button").click()
    wait("the overview", lambda: d.current_url.rstrip("/").endswith("/ui"))
    who = d.find_element(By.ID, "who").text
    if "admin" not in who:
        fail(f"signed in as {who!r}")
    wait("the live stream", lambda: "on" in d.find_element(By.ID, "live-state").get_attribute("class"))
    shot(d, "dashboard-overview.png")
    say("RESULT signed-in=admin")
    d.get(URL + "/ui/nodes")
    shot(d, "dashboard-nodes.png")
    d.get(URL + "/ui/events")
    shot(d, "dashboard-events.png")


def viewer(d):
    with_session(d)
    node = os.environ["DASH_NODE"]
    d.get(f"{URL}/ui/nodes/{node}")
    button = wait("the cordon button", lambda: d.find_elements(By.ID, "act-cordon"))[0]
    if button.is_enabled():
        fail("a viewer's cordon button is enabled")
    button.click()  # a disabled button does nothing
    if "done=" in d.current_url:
        fail("a viewer's disabled button acted")
    # And the endpoint refuses the viewer anyway, with its own CSRF token.
    status = d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const csrf = document.querySelector('meta[name="csrf"]').content;
        fetch('/ui/action', {method: 'POST', headers: {'x-csrf-token': csrf,
              'content-type': 'application/x-www-form-urlencoded'},
              body: 'action=cordon&node=' + encodeURIComponent(arguments[0])})
          .then(r => done(r.status)).catch(e => done(String(e)));
    """, node)
    if status != 403:
        fail(f"the endpoint answered a viewer's cordon with {status}")
    say("RESULT viewer-refused=403")
    shot(d, "dashboard-node-viewer.png")
    pod = os.environ.get("DASH_POD_PATH")
    if pod:
        d.get(URL + pod)
        wait("the pod's containers", lambda: "Containers" in d.page_source)
        delete = d.find_element(By.ID, "act-delete-pod")
        if delete.is_enabled():
            fail("a viewer's delete button is enabled")
        shot(d, "dashboard-pod.png")
    d.set_window_size(390, 844)
    d.get(URL + "/ui")
    wait("the overview", lambda: d.find_elements(By.ID, "count-total"))
    shot(d, "dashboard-phone.png")


def cells(d):
    return d.execute_script(
        "return Array.from(document.querySelectorAll('#grid .c')).map(c => c.className)")


def rollout(d):
    """A DaemonSet's grid of nodes, or a Deployment's of pods (the same
    `#grid .c` cells), from all updated through a rollout to all updated."""
    prefix = os.environ.get("DASH_SHOT_PREFIX", "dashboard-daemonset")
    with_session(d)
    d.get(URL + os.environ["DASH_PATH"])
    n = int(os.environ.get("DASH_NODES", "20"))
    wait("the grid updated before", lambda: len(cells(d)) == n and all("s-updated" in c for c in cells(d)))
    wait("the live stream", lambda: "on" in d.find_element(By.ID, "live-state").get_attribute("class"))
    say("READY")
    if sys.stdin.readline().strip() != "GO":
        fail("the test did not say GO")
    states = set()
    shot_taken = False
    end = time.monotonic() + 60
    while time.monotonic() < end:
        now = cells(d)
        for c in now:
            states.update(s for s in c.split() if s.startswith("s-"))
        if not shot_taken and any("s-updated" not in c for c in now):
            shot(d, f"{prefix}-rolling.png")
            shot_taken = True
        if states - {"s-updated"} and len(now) >= n and all("s-updated" in c for c in now):
            break
        time.sleep(0.02)
    else:
        fail(f"the grid did not end updated; states seen {sorted(states)}")
    if not states - {"s-updated"}:
        fail("the grid never showed a node waiting or updating")
    say("RESULT states=" + ",".join(sorted(states)))
    shot(d, f"{prefix}.png")


def post_action(d, form):
    """POSTs `form` to /ui/action from the page, with its CSRF token if it
    has one: the answer's status."""
    return d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const m = document.querySelector('meta[name="csrf"]');
        const headers = {'content-type': 'application/x-www-form-urlencoded'};
        if (m) headers['x-csrf-token'] = m.content;
        fetch('/ui/action', {method: 'POST', headers: headers, body: arguments[0]})
          .then(r => done(r.status)).catch(e => done(String(e)));
    """, form)


def viewer_deploy(d):
    """A Deployment's page: without a session, the sign-in form and the
    action refused (401); as a viewer, its buttons disabled and the
    endpoint refusing them (403)."""
    path = os.environ["DASH_PATH"]
    ns, name = path.rstrip("/").split("/")[-2:]
    form = f"kind=deployment&namespace={ns}&name={name}&action="
    d.get(URL + path)
    wait("the sign-in form", lambda: "/ui/login" in d.current_url)
    status = post_action(d, form + "restart")
    if status != 401:
        fail(f"the endpoint answered a restart without a session with {status}")
    say("RESULT unauthenticated=401")
    with_session(d)
    d.get(URL + path)
    wait("the Deployment's grid", lambda: d.find_elements(By.CSS_SELECTOR, "#grid .c"))
    for action in ("restart", "undo"):
        button = d.find_element(By.ID, f"act-{action}")
        if button.is_enabled():
            fail(f"a viewer's {action} button is enabled")
        button.click()  # a disabled button does nothing
        if "done=" in d.current_url:
            fail(f"a viewer's disabled {action} button acted")
        status = post_action(d, form + action)
        if status != 403:
            fail(f"the endpoint answered a viewer's {action} with {status}")
    say("RESULT viewer-refused=403")
    shot(d, "dashboard-deployment-viewer.png")


def red(d):
    with_session(d)
    node = os.environ["DASH_NODE"]
    d.get(URL + os.environ["DASH_PATH"])
    pill = f"document.getElementById('n:{node}').querySelector('[data-status]').className"
    wait("the node Ready", lambda: "ok" in d.execute_script("return " + pill))
    wait("the live stream", lambda: "on" in d.find_element(By.ID, "live-state").get_attribute("class"))
    say("READY")
    wait(f"{node} red", lambda: "bad" in d.execute_script("return " + pill), within=60, every=0.01)
    say("RED")
    shot(d, "dashboard-nodes-notready.png")


def paint(d):
    with_session(d)
    path = os.environ["DASH_PATH"]
    d.get(URL + path)
    fcp = wait("the first paint", lambda: d.execute_script("""
        const p = performance.getEntriesByName('first-contentful-paint')[0];
        return p ? p.startTime : null;"""))
    nav = d.execute_script("""
        const n = performance.getEntriesByType('navigation')[0];
        return [n.responseStart - n.requestStart, n.responseEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime];""")
    say(f"RESULT first-paint-ms={fcp:.0f} response-ms={nav[0]:.0f} "
        f"loaded-ms={nav[1]:.0f} dom-ready-ms={nav[2]:.0f}")
    shot(d, os.environ.get("DASH_SHOT", "dashboard-paint.png"))


SCENARIOS = {"signin": signin, "viewer": viewer, "rollout": rollout, "red": red, "paint": paint,
             "viewer-deploy": viewer_deploy}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        fail(f"usage: dashboard.py {'|'.join(SCENARIOS)}")
    d = browser(390, 844) if os.environ.get("DASH_PHONE") else browser()
    DRIVER = d
    try:
        SCENARIOS[sys.argv[1]](d)
    finally:
        d.quit()
