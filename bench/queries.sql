# The queries bench/queries-compare.sh times: what web and reporting
# applications send to a customers/orders schema. One per line; `#` lines
# are comments. Answers are compared as sorted rows unless ORDER BY.
SELECT * FROM orders WHERE id = 4242
SELECT * FROM orders WHERE id IN (5, 500, 5000, 45000)
SELECT * FROM orders WHERE customer_id = 77 ORDER BY created DESC LIMIT 5
SELECT id, customer_id FROM orders ORDER BY id LIMIT 10
SELECT id, customer_id FROM orders ORDER BY id LIMIT 10000, 10
SELECT id, created FROM orders ORDER BY created DESC LIMIT 20
SELECT id, created FROM orders ORDER BY created DESC LIMIT 5000, 20
SELECT MIN(created), MAX(created) FROM orders
SELECT COUNT(*) FROM orders
SELECT COUNT(*) FROM orders WHERE customer_id = 5
SELECT COUNT(*) FROM orders WHERE created >= '2024-06-01' AND created < '2024-07-01'
SELECT COUNT(*) FROM orders WHERE customer_id BETWEEN 100 AND 300
SELECT COUNT(*) FROM orders WHERE id > 10000 AND customer_id < 500
SELECT COUNT(*), SUM(amount) FROM orders
SELECT status, COUNT(*) FROM orders GROUP BY status
SELECT COUNT(*), SUM(amount) FROM orders WHERE status = 'paid'
SELECT COUNT(DISTINCT customer_id) FROM orders
SELECT COUNT(DISTINCT status) FROM orders
SELECT DISTINCT status FROM orders
SELECT customer_id, COUNT(*), SUM(amount) FROM orders GROUP BY customer_id ORDER BY customer_id LIMIT 5
SELECT o.id, c.name FROM orders o JOIN customers c ON c.id = o.customer_id ORDER BY o.created DESC LIMIT 20
SELECT o.id, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.country = 'SE' ORDER BY o.created DESC LIMIT 20
SELECT o.id, c.name FROM orders o JOIN customers c ON c.id = o.customer_id ORDER BY o.id LIMIT 2000, 10
SELECT c.country, COUNT(*), SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.country
SELECT c.name, SUM(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.name ORDER BY 2 DESC LIMIT 10
