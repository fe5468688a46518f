"""Headless Chromium from Debian (chromium, chromium-driver) driven with Debian's python3-selenium."""
import os
import shutil
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def chromium(spki=None, profile=None, inject=None):
    """A phone-sized (390×844) headless Chromium. `spki`: trust exactly this certificate key (base64 SHA-256 of its
    SubjectPublicKeyInfo), nothing else. `profile`: a user-data directory to keep IndexedDB across drivers.
    `inject`: JavaScript run in every new document before the page's own scripts."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which('chromium') or '/usr/bin/chromium'
    for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                '--window-size=390,844', '--no-first-run', '--no-default-browser-check',
                '--disable-background-networking', '--disable-component-update',
                '--use-fake-ui-for-media-stream', '--force-device-scale-factor=1'):
        options.add_argument(arg)
    if spki:
        options.add_argument('--ignore-certificate-errors-spki-list=' + spki)
    options.add_argument('--user-data-dir=' + (profile or tempfile.mkdtemp(prefix='sb-chromium-')))
    options.add_experimental_option('mobileEmulation', {
        'deviceMetrics': {'width': 390, 'height': 844, 'pixelRatio': 1},
        'userAgent': 'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) '
                     'Chrome/156.0.0.0 Mobile Safari/537.36'})
    service = Service(shutil.which('chromedriver') or '/usr/bin/chromedriver')
    driver = webdriver.Chrome(service=service, options=options)
    if inject:
        driver.execute_cdp_cmd('Page.addScriptToEvaluateOnNewDocument', {'source': inject})
    return driver
