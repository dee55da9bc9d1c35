# The status page (web/, docs/web.md). Its server tests run in test-go on
# both stores; test-web drives the pages in a real browser: Debian's
# Chromium, headless, one session for the whole suite.

.PHONY: test-web web-tools web-screenshot
TEST_TARGETS += test-web

WEB_BROWSER_TEST := $(GO) test -count=1 -timeout 10m -tags browser -run '^TestStatusPageInARealBrowser$$' ./web/

web-tools:
	@command -v chromium >/dev/null || { echo "installing chromium from Debian"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

test-web: web-tools ## the status page in headless Chromium on SQLite and PostgreSQL (screenshots in build/web)
	$(GO) vet -tags browser ./web/
	$(PG_RUN) $(WEB_BROWSER_TEST)

web-screenshot: web-tools ## the browser suite, keeping its overview as docs/status-page.png (the README's screenshot)
	$(PG_RUN) env LEASES_WEB_SCREENSHOT=$(ROOT)/docs/status-page.png $(WEB_BROWSER_TEST)
