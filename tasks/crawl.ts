/** `deno task crawl`: the crawl engine is not built yet (issue: the crawl engine). */
console.error("deno task crawl: not yet: the crawl engine has not landed; `deno task plan` works");
Deno.exit(1);
